/** A template's root filesystem or ready state could not be built; nothing partial was kept. */
export class ImageBuildError extends Error {
  override readonly name = 'ImageBuildError';
  constructor(
    message: string,
    readonly detail?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
