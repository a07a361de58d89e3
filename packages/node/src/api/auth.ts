import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest, RouteOptions } from 'fastify';
import { checkApiKey } from '@agentenv/common';

/**
 * Who may call a route: `public` routes answer anyone (health, metrics, the dashboard's files,
 * the OpenAPI document, the volume content API, which each volume's own token authorises);
 * `key` routes, the default, need the API key.
 */
export type RouteAuth = 'public' | 'key';

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: RouteAuth;
  }
}

/** A route's `config` that makes it public. */
export const PUBLIC_ROUTE = { auth: 'public' } as const;

/** One route the router holds, with who may call it. */
export interface RouteAccess {
  method: string;
  url: string;
  auth: RouteAuth;
}

const authOf = (config: { auth?: RouteAuth } | undefined): RouteAuth =>
  config?.auth === 'public' ? 'public' : 'key';

/**
 * The one authentication gate, decided on the route the router matched (an onRequest hook runs
 * after routing, on the decoded path), never on the raw URL: a request that no route takes
 * needs the key too, so an unknown path tells nothing to a caller without one.
 */
export function authGate(apiKey: string) {
  return async (req: FastifyRequest): Promise<void> => {
    if (!req.is404 && authOf(req.routeOptions.config) === 'public') return;
    checkApiKey(req.headers, req.raw.rawHeaders, apiKey);
  };
}

/**
 * An onRoute hook that records every route as it is added, with its access, into `table`: the list an audit (and
 * the route × key tests) reads from the router itself, so no route can be left out of it.
 */
export function routeRecorder(table: RouteAccess[]) {
  return (route: Pick<RouteOptions, 'method' | 'url' | 'config'>): void => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    // Read when asked: a plugin's own onRoute hook (asPublic) may still set the route's config.
    for (const method of methods)
      table.push({
        method,
        url: route.url,
        get auth() {
          return authOf(route.config as { auth?: RouteAuth } | undefined);
        },
      });
  };
}

/**
 * `plugin` with every route it adds made public: for a plugin that authorises its requests
 * itself (the volume content API checks each volume's token).
 */
export function asPublic<O extends object>(
  plugin: FastifyPluginAsyncTypebox<O>,
): FastifyPluginAsyncTypebox<O> {
  return async (app, opts) => {
    app.addHook('onRoute', (route: RouteOptions) => {
      route.config = { ...(route.config as object), ...PUBLIC_ROUTE };
    });
    await app.register(plugin, opts);
  };
}
