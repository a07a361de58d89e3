import type { IncomingMessage, ServerResponse } from 'node:http';
import { DashboardAssets, isDashboardPage } from './assets.js';

/**
 * A plain `node:http` handler for the dashboard's pages, for servers without Fastify (the
 * gateway): answers GET/HEAD of /dashboard paths and returns true, or returns false and leaves
 * the request alone. The API key is not needed for the pages; their data calls carry it.
 */
export function dashboardPageHandler(assets = DashboardAssets.load()) {
  return (req: IncomingMessage, res: ServerResponse): boolean => {
    const pathname = (req.url ?? '/').split('?')[0]!;
    if (!isDashboardPage(pathname)) return false;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: 405, message: `${req.method} is not allowed on ${pathname}` }));
      return true;
    }
    const inm = req.headers['if-none-match'];
    const a = assets.lookup(pathname, typeof inm === 'string' ? inm : undefined);
    res.writeHead(a.status, { ...a.headers, 'content-length': String(a.body.length) });
    res.end(req.method === 'HEAD' ? undefined : a.body);
    return true;
  };
}
