import { Code, ConnectError } from '@connectrpc/connect';

/** The kinds of failure envd reports; each maps to one Connect code and one HTTP status. */
export type EnvdErrorKind =
  | 'invalid_argument'
  | 'not_found'
  | 'already_exists'
  | 'unauthenticated'
  | 'permission_denied'
  | 'failed_precondition'
  | 'resource_exhausted'
  | 'insufficient_storage'
  | 'internal';

export class EnvdError extends Error {
  constructor(
    readonly kind: EnvdErrorKind,
    message: string,
  ) {
    super(message);
    this.name = 'EnvdError';
  }
}

export const invalidArgument = (msg: string) => new EnvdError('invalid_argument', msg);
export const notFound = (msg: string) => new EnvdError('not_found', msg);
export const alreadyExists = (msg: string) => new EnvdError('already_exists', msg);
export const unauthenticated = (msg: string) => new EnvdError('unauthenticated', msg);

const connectCodes: Record<EnvdErrorKind, Code> = {
  invalid_argument: Code.InvalidArgument,
  not_found: Code.NotFound,
  already_exists: Code.AlreadyExists,
  unauthenticated: Code.Unauthenticated,
  permission_denied: Code.PermissionDenied,
  failed_precondition: Code.FailedPrecondition,
  resource_exhausted: Code.ResourceExhausted,
  insufficient_storage: Code.ResourceExhausted,
  internal: Code.Internal,
};

const httpStatuses: Record<EnvdErrorKind, number> = {
  invalid_argument: 400,
  not_found: 404,
  already_exists: 409,
  unauthenticated: 401,
  permission_denied: 403,
  failed_precondition: 400,
  resource_exhausted: 429,
  insufficient_storage: 507,
  internal: 500,
};

/** Node's errno codes that mean something other than an internal failure. */
const errnoKinds: Record<string, EnvdErrorKind> = {
  ENOENT: 'not_found',
  ENOTDIR: 'invalid_argument',
  EISDIR: 'invalid_argument',
  EEXIST: 'already_exists',
  ENOTEMPTY: 'failed_precondition',
  EACCES: 'permission_denied',
  EPERM: 'permission_denied',
  EROFS: 'permission_denied',
  ENOSPC: 'insufficient_storage',
  EDQUOT: 'insufficient_storage',
  ENAMETOOLONG: 'invalid_argument',
  ELOOP: 'invalid_argument',
  EINVAL: 'invalid_argument',
};

/** Turns anything thrown into an EnvdError; `context` names the object the call was about. */
export function toEnvdError(err: unknown, context?: string): EnvdError {
  if (err instanceof EnvdError) return err;
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const kind = (code && errnoKinds[code]) || 'internal';
  const base = err instanceof Error ? err.message : String(err);
  const message =
    kind === 'not_found' && context ? `path not found: ${context}` : context ? `${context}: ${base}` : base;
  return new EnvdError(kind, message);
}

export function toConnectError(err: unknown, context?: string): ConnectError {
  if (err instanceof ConnectError) return err;
  const e = toEnvdError(err, context);
  return new ConnectError(e.message, connectCodes[e.kind]);
}

export function httpStatusOf(err: EnvdError): number {
  return httpStatuses[err.kind];
}
