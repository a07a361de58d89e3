/** The API key lives in this tab's session storage only: closing the tab logs out. */
const KEY = 'aenv.apiKey';

export const session = {
  get: (): string | null => sessionStorage.getItem(KEY),
  set: (key: string) => sessionStorage.setItem(KEY, key),
  clear: () => sessionStorage.removeItem(KEY),
};
