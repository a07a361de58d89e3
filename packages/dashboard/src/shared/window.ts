/** How far back the overview looks, on the server and in the app. */
export const WINDOW_MS = 15 * 60_000;
