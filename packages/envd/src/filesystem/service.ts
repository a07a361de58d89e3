import { rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import { type Filesystem, type WatchDirResponse, WatchDirResponseSchema } from '@agentenv/protocol';
import { basicAuthUser } from '../auth.js';
import { alreadyExists, invalidArgument, notFound, toConnectError } from '../errors.js';
import type { EnvdState } from '../state.js';
import { abortError, AsyncQueue, keepaliveIntervalMs, withKeepalive } from '../streams.js';
import type { SystemUser } from '../users.js';
import { ensureDirs } from './dirs.js';
import { entryInfo } from './entry.js';
import { listDir } from './list.js';
import { checkWatchable, DirWatcher, WatcherRegistry } from './watch.js';

const watchResponse = (event: MessageInitShape<typeof WatchDirResponseSchema>['event']) =>
  create(WatchDirResponseSchema, { event });

/**
 * filesystem.Filesystem as E2B's envd implements it. Every call acts as the Basic-auth user (else
 * the default user); relative paths are under that user's home, an empty one is the default
 * workdir.
 */
// eslint-disable-next-line max-lines-per-function -- declarative: one RPC handler after another
export function filesystemService(state: EnvdState): ServiceImpl<typeof Filesystem> {
  const registry = new WatcherRegistry();
  const namer = () => state.users.namer();

  const userOf = (ctx: HandlerContext): SystemUser =>
    state.userFor(basicAuthUser(ctx.requestHeader.get('authorization') ?? undefined));
  const resolve = (p: string, user: SystemUser) => state.resolvePath(p, user, true);

  /**
   * Runs an RPC body, turning whatever it throws into the Connect error E2B would send; `at`
   * names the path the call is about for messages such as "path not found: /home/user/x".
   */
  async function rpc<T>(body: (at: (p: string) => string) => Promise<T>): Promise<T> {
    let context: string | undefined;
    try {
      return await body((p) => (context = p));
    } catch (err) {
      throw toConnectError(err, context);
    }
  }

  return {
    stat: (req, ctx) =>
      rpc(async (at) => {
        const p = at(resolve(req.path, userOf(ctx)));
        return { entry: await entryInfo(p, namer()) };
      }),

    makeDir: (req, ctx) =>
      rpc(async (at) => {
        const user = userOf(ctx);
        const p = at(resolve(req.path, user));
        const existing = await stat(p).catch((err: NodeJS.ErrnoException) => {
          if (err.code === 'ENOENT') return undefined;
          throw err;
        });
        if (existing?.isDirectory()) throw alreadyExists(`directory already exists: ${p}`);
        if (existing) throw invalidArgument(`path already exists but it is not a directory: ${p}`);
        await ensureDirs(p, user.uid, user.gid);
        return { entry: await entryInfo(p, namer()) };
      }),

    move: (req, ctx) =>
      rpc(async (at) => {
        const user = userOf(ctx);
        const source = at(resolve(req.source, user));
        const destination = at(resolve(req.destination, user));
        await ensureDirs(path.dirname(destination), user.uid, user.gid);
        try {
          await rename(source, destination);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOENT')
            throw notFound(`source file not found: ${source}`);
          throw err;
        }
        return { entry: await entryInfo(destination, namer()) };
      }),

    listDir: (req, ctx) =>
      rpc(async (at) => ({
        entries: await listDir(at(resolve(req.path, userOf(ctx))), req.depth, namer()),
      })),

    // rm -rf: removing what is not there succeeds, as in E2B's envd (its SDK tests rely on it).
    remove: (req, ctx) =>
      rpc(async (at) => {
        await rm(at(resolve(req.path, userOf(ctx))), { recursive: true, force: true });
        return {};
      }),

    async *watchDir(req, ctx) {
      const events = new AsyncQueue<WatchDirResponse>();
      const stop = () => events.close();
      let watcher: DirWatcher | undefined;
      try {
        await rpc(async (at) => {
          const dir = at(resolve(req.path, userOf(ctx)));
          await checkWatchable(dir, req.allowNetworkMounts);
          watcher = new DirWatcher(dir, {
            recursive: req.recursive,
            includeEntry: req.includeEntry,
            namer,
            onEvent: (value) => events.push(watchResponse({ case: 'filesystem', value })),
            onError: (err) => events.close(toConnectError(err, 'watcher error')),
          });
          await watcher.start();
        });
        ctx.signal.addEventListener('abort', stop, { once: true });
        yield watchResponse({ case: 'start', value: {} });
        yield* withKeepalive(
          events,
          keepaliveIntervalMs(ctx.requestHeader),
          () => watchResponse({ case: 'keepalive', value: {} }),
          ctx.signal,
        );
        const aborted = abortError(ctx.signal);
        if (aborted) throw aborted;
      } finally {
        ctx.signal.removeEventListener('abort', stop);
        watcher?.close();
        events.close();
      }
    },

    createWatcher: (req, ctx) =>
      rpc(async (at) => {
        const dir = at(resolve(req.path, userOf(ctx)));
        await checkWatchable(dir, req.allowNetworkMounts);
        const watcherId = await registry.create(dir, {
          recursive: req.recursive,
          includeEntry: req.includeEntry,
          namer,
        });
        return { watcherId };
      }),

    getWatcherEvents: (req) => rpc(async () => ({ events: registry.drain(req.watcherId) })),

    removeWatcher: (req) =>
      rpc(async () => {
        registry.remove(req.watcherId);
        return {};
      }),
  };
}
