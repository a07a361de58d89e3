import { Code, ConnectError } from '@connectrpc/connect';
import { DomainError, type DomainErrorKind } from '@agentenv/common';

/** The one place domain errors become Connect errors (and gRPC statuses). */
export const CONNECT_CODE: Readonly<Record<DomainErrorKind, Code>> = {
  invalid: Code.InvalidArgument,
  unauthorized: Code.Unauthenticated,
  forbidden: Code.PermissionDenied,
  not_found: Code.NotFound,
  conflict: Code.FailedPrecondition,
  gone: Code.NotFound,
  too_large: Code.InvalidArgument,
  capacity: Code.ResourceExhausted,
  unavailable: Code.Unavailable,
  bad_gateway: Code.Unavailable,
  timeout: Code.DeadlineExceeded,
  unsupported: Code.Unimplemented,
  runtime_failure: Code.Internal,
  internal: Code.Internal,
};

/** The kind a client sees for each code; transport failures and the rest count as unavailable. */
const KIND_OF_CODE: ReadonlyMap<Code, DomainErrorKind> = new Map([
  [Code.InvalidArgument, 'invalid'],
  [Code.Unauthenticated, 'unauthorized'],
  [Code.PermissionDenied, 'forbidden'],
  [Code.NotFound, 'not_found'],
  [Code.FailedPrecondition, 'conflict'],
  [Code.ResourceExhausted, 'capacity'],
  [Code.DeadlineExceeded, 'timeout'],
  [Code.Unimplemented, 'unsupported'],
  [Code.Internal, 'internal'],
]);

/** Response header carrying the seconds to wait before retrying a `capacity` refusal. */
export const RETRY_AFTER_HEADER = 'retry-after';

export function toConnectError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof DomainError) {
    const metadata = new Headers();
    if (err.retryAfter) metadata.set(RETRY_AFTER_HEADER, String(err.retryAfter));
    return new ConnectError(err.message, CONNECT_CODE[err.kind], metadata);
  }
  return new ConnectError('internal error', Code.Internal);
}

/** A failed scheduler call as its clients read it. */
export interface SchedulerCallError {
  kind: DomainErrorKind;
  message: string;
  retryAfter?: number;
  /**
   * The scheduler answered (a refusal), as opposed to no answer at all: the transport failed,
   * the call timed out or was cancelled. Both can be `unavailable`: no healthy node is an answer.
   */
  reached: boolean;
}

/**
 * The reverse, for the scheduler's clients (the node agent, the gateway): the domain kind of a
 * failed call, its message and retry-after, so they answer with the status the kind has.
 */
export function fromConnectError(err: unknown): SchedulerCallError {
  const ce = ConnectError.from(err);
  const retry = Number(ce.metadata.get(RETRY_AFTER_HEADER));
  return {
    kind: isTransportFailure(err) ? 'unavailable' : (KIND_OF_CODE.get(ce.code) ?? 'unavailable'),
    message: ce.rawMessage,
    ...(retry > 0 ? { retryAfter: retry } : {}),
    reached: answered(err),
  };
}

function answered(err: unknown): boolean {
  if (!(err instanceof ConnectError)) return false;
  if (err.code === Code.DeadlineExceeded || err.code === Code.Canceled) return false;
  return !isTransportFailure(err);
}

/**
 * The call failed at the socket (ECONNREFUSED, EPIPE, ECONNRESET, …), which connect-node reports
 * as Unavailable, Aborted or Internal with the system error in its cause chain; a refusal the
 * scheduler sent has no cause.
 */
export function isTransportFailure(err: unknown): boolean {
  if (!(err instanceof ConnectError)) return false;
  for (let c: unknown = err.cause, depth = 0; c instanceof Error && depth < 5; c = c.cause, depth++) {
    const code = (c as { code?: unknown }).code;
    if (typeof code === 'string' && /^E[A-Z_]+$/.test(code) && !code.startsWith('ERR_')) return true;
  }
  return false;
}
