import type { EnvdInit } from '@agentenv/protocol';
import { safeEqual } from './auth.js';
import { invalidArgument } from './errors.js';
import { resolveUserPath } from './paths.js';
import { UserDatabase, type SystemUser } from './users.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * How far ahead of envd's clock an /init's timestamp may be: the node and the sandbox share the
 * host's clock, so this only absorbs rounding. A later time is refused, since it would make envd
 * ignore every /init until then.
 */
export const INIT_CLOCK_SKEW_MS = 60_000;

/** Sandbox-wide state of one envd: set by /init, read by every request. */
export class EnvdState {
  readonly users: UserDatabase;
  envVars: Record<string, string> = {};
  accessToken: string | undefined;
  defaultUser: string;
  defaultWorkdir: string | undefined;
  private lastInit = 0;
  private readonly now: () => number;

  constructor(opts: { defaultUser: string; etcDir?: string; now?: () => number }) {
    this.defaultUser = opts.defaultUser;
    this.users = new UserDatabase(opts.etcDir);
    this.now = opts.now ?? Date.now;
  }

  /**
   * Applies an /init body. Inits carry the node's clock; an older one than the last applied is
   * ignored, so a delayed retry cannot roll a sandbox back to stale settings; one from beyond
   * INIT_CLOCK_SKEW_MS ahead is refused. True when the body was applied.
   */
  init(body: Partial<EnvdInit>): boolean {
    if (body.timestamp !== undefined) {
      const t = Date.parse(body.timestamp);
      if (Number.isNaN(t)) throw invalidArgument('timestamp must be an ISO-8601 time');
      if (t > this.now() + INIT_CLOCK_SKEW_MS)
        throw invalidArgument(
          `timestamp ${body.timestamp} is more than ${INIT_CLOCK_SKEW_MS / 1000} s ahead of the sandbox's clock`,
        );
      if (t < this.lastInit) return false;
      this.lastInit = t;
    }
    if (body.bootId !== undefined && (typeof body.bootId !== 'string' || !UUID.test(body.bootId))) {
      throw invalidArgument('bootId must be a lower-case UUID');
    }
    if (body.envVars !== undefined) {
      for (const [k, v] of Object.entries(body.envVars)) {
        if (typeof v !== 'string') throw invalidArgument(`envVars.${k} must be a string`);
      }
      this.envVars = { ...this.envVars, ...body.envVars };
    }
    if (body.defaultUser) {
      try {
        this.users.lookup(body.defaultUser);
      } catch {
        throw invalidArgument(`defaultUser '${body.defaultUser}' does not exist`);
      }
      this.defaultUser = body.defaultUser;
    }
    if (body.defaultWorkdir !== undefined) this.defaultWorkdir = body.defaultWorkdir || undefined;
    if (body.accessToken !== undefined) this.accessToken = body.accessToken || undefined;
    return true;
  }

  /** True when no token is set or the given one matches it. */
  tokenAccepted(given: string | undefined | null): boolean {
    if (!this.accessToken) return true;
    return typeof given === 'string' && safeEqual(given, this.accessToken);
  }

  /** The user a request acts as: the one it names, else the default user. */
  userFor(requested: string | undefined): SystemUser {
    return this.users.lookup(requested || this.defaultUser);
  }

  /** A client path as an absolute path for `user` (see resolveUserPath). */
  resolvePath(p: string, user: SystemUser, useDefaultWorkdir = false): string {
    return resolveUserPath(p, user.home, useDefaultWorkdir ? this.defaultWorkdir : undefined);
  }
}
