import { DomainError, type DomainErrorKind } from '@agentenv/common';

/** Base of every error a runtime driver throws; `code` is stable, the kind follows from it. */
export class RuntimeError extends DomainError {
  override readonly name: string = 'RuntimeError';
  constructor(
    readonly code: RuntimeErrorCode,
    message: string,
    /** Runtime output (stderr, logs) that explains the failure, for operators. */
    readonly detail?: string,
    options?: { cause?: unknown },
  ) {
    super(RUNTIME_ERROR_KIND[code], message, undefined, options);
  }
}

export type RuntimeErrorCode =
  | 'unavailable'
  | 'not_found'
  | 'invalid_request'
  | 'start_failed'
  | 'not_ready'
  | 'checkpoint_failed'
  | 'restore_failed'
  | 'operation_failed';

/**
 * What each code is for a client. A request the driver refuses names what is wrong with it; the
 * rest are failures of the runtime on this node.
 */
export const RUNTIME_ERROR_KIND: Readonly<Record<RuntimeErrorCode, DomainErrorKind>> = {
  unavailable: 'unavailable',
  not_found: 'runtime_failure',
  invalid_request: 'invalid',
  start_failed: 'runtime_failure',
  not_ready: 'runtime_failure',
  checkpoint_failed: 'runtime_failure',
  restore_failed: 'runtime_failure',
  operation_failed: 'runtime_failure',
};

/** Host prerequisites are missing; the message says how to fix them. */
export class DriverUnavailableError extends RuntimeError {
  override readonly name = 'DriverUnavailableError';
  constructor(message: string) {
    super('unavailable', message);
  }
}

export class SandboxNotFoundError extends RuntimeError {
  override readonly name = 'SandboxNotFoundError';
  constructor(readonly sandboxId: string) {
    super('not_found', `sandbox ${sandboxId} is not known to this driver`);
  }
}

export class InvalidRequestError extends RuntimeError {
  override readonly name = 'InvalidRequestError';
  constructor(message: string) {
    super('invalid_request', message);
  }
}

/** The sandbox could not be started, or envd never became healthy; it has been cleaned up. */
export class SandboxStartError extends RuntimeError {
  override readonly name = 'SandboxStartError';
}

/** The checkpoint failed; the sandbox is still running (unless leaveRunning was false and it died). */
export class CheckpointError extends RuntimeError {
  override readonly name = 'CheckpointError';
  constructor(message: string, detail?: string, options?: { cause?: unknown }) {
    super('checkpoint_failed', message, detail, options);
  }
}

/** A runtime command (pause, resume, stats, ...) failed. */
export class RuntimeOperationError extends RuntimeError {
  override readonly name = 'RuntimeOperationError';
  constructor(message: string, detail?: string, options?: { cause?: unknown }) {
    super('operation_failed', message, detail, options);
  }
}
