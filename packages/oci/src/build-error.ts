import { DomainError } from '@agentenv/common';

/** A template's root filesystem or ready state could not be built; nothing partial was kept. */
export class ImageBuildError extends DomainError {
  override readonly name = 'ImageBuildError';
  constructor(
    message: string,
    readonly detail?: string,
    options?: { cause?: unknown },
  ) {
    super('internal', message, undefined, options);
  }
}
