import { useEffect, useState } from 'preact/hooks';

export interface Route {
  /** The first path segment: '', 'nodes', 'sandboxes', 'catalog', 'templates'. */
  view: string;
  /** The second one (a sandbox or template id), if any. */
  id?: string;
  query: URLSearchParams;
}

/** Routes live in the hash (#/sandboxes/abc?state=paused): the server serves one page. */
export function parseHash(hash: string): Route {
  const raw = hash.replace(/^#\/?/, '');
  const [path = '', query = ''] = raw.split('?');
  const [view = '', id] = path.split('/').map((p) => decodeURIComponent(p));
  return { view, ...(id ? { id } : {}), query: new URLSearchParams(query) };
}

export function href(view: string, id?: string, query?: Record<string, string>): string {
  const q = query ? new URLSearchParams(Object.entries(query).filter(([, v]) => v !== '')).toString() : '';
  return `#/${view}${id ? `/${encodeURIComponent(id)}` : ''}${q ? `?${q}` : ''}`;
}

export function navigate(to: string): void {
  if (location.hash !== to) location.hash = to;
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseHash(location.hash));
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}
