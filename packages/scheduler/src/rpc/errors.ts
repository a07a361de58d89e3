import { Code, ConnectError } from '@connectrpc/connect';
import { SchedulerError, type SchedulerErrorKind } from '../errors.js';

/** The one place scheduler errors become Connect errors (and gRPC statuses). */
export const CONNECT_CODE: Readonly<Record<SchedulerErrorKind, Code>> = {
  invalid: Code.InvalidArgument,
  unauthorized: Code.Unauthenticated,
  not_found: Code.NotFound,
  conflict: Code.FailedPrecondition,
  capacity: Code.ResourceExhausted,
  unavailable: Code.Unavailable,
  internal: Code.Internal,
};

/** Response header carrying the seconds to wait before retrying a `capacity` refusal. */
export const RETRY_AFTER_HEADER = 'retry-after';

export function toConnectError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof SchedulerError) {
    const metadata = new Headers();
    if (err.retryAfter) metadata.set(RETRY_AFTER_HEADER, String(err.retryAfter));
    return new ConnectError(err.message, CONNECT_CODE[err.kind], metadata);
  }
  return new ConnectError('internal error', Code.Internal);
}

/** The reverse, for clients (the node agent, the gateway): kind and retry-after of a failed call. */
export function fromConnectError(err: unknown): {
  kind: SchedulerErrorKind;
  message: string;
  retryAfter?: number;
} {
  const ce = ConnectError.from(err);
  const kind = (Object.entries(CONNECT_CODE).find(([, c]) => c === ce.code)?.[0] ??
    'unavailable') as SchedulerErrorKind;
  const retry = Number(ce.metadata.get(RETRY_AFTER_HEADER));
  return { kind, message: ce.rawMessage, ...(retry > 0 ? { retryAfter: retry } : {}) };
}
