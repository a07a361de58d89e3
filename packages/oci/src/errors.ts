import { codedError, type DomainErrorKind } from '@agentenv/common';

/** Why a pull failed; stable strings the API layer can map onto status codes. */
export type OciErrorCode =
  | 'bad_reference'
  | 'not_found'
  | 'unauthorized'
  | 'registry_unavailable'
  | 'registry_error'
  | 'digest_mismatch'
  | 'unsupported'
  | 'platform_mismatch'
  | 'unsafe_layer'
  /** The image unpacks to more bytes or entries than the node allows. */
  | 'over_limit'
  | 'disk_full'
  | 'cache_full';

/** Image pull failures for a client: its reference or image, or the registry's fault. */
export const OCI_ERROR_KIND: Readonly<Record<OciErrorCode, DomainErrorKind>> = {
  bad_reference: 'invalid',
  not_found: 'not_found',
  unauthorized: 'invalid',
  unsupported: 'invalid',
  platform_mismatch: 'invalid',
  unsafe_layer: 'invalid',
  over_limit: 'invalid',
  registry_unavailable: 'bad_gateway',
  registry_error: 'bad_gateway',
  digest_mismatch: 'bad_gateway',
  disk_full: 'unavailable',
  cache_full: 'unavailable',
};

/** A pull, or one of its steps, failed; nothing partial was kept. */
export class OciError extends codedError(OCI_ERROR_KIND) {
  override readonly name: string = 'OciError';
}

/** The layer cache is over capacity and every layer in it is pinned (held by a template or a pull). */
export class LayerCacheFullError extends OciError {
  override readonly name = 'LayerCacheFullError';
  constructor(
    readonly neededBytes: number,
    readonly capacityBytes: number,
    readonly pinnedBytes: number,
  ) {
    super(
      'cache_full',
      `layer cache full: ${fmtBytes(neededBytes)} needed, capacity ${fmtBytes(capacityBytes)}, ` +
        `${fmtBytes(pinnedBytes)} held by pinned layers that cannot be evicted`,
    );
  }
}

export function fmtBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

/** The errno code anywhere in an error's cause chain (ImageBuildError wraps fs errors). */
export function errnoIn(e: unknown, codes: readonly string[]): string | undefined {
  for (let cur = e, depth = 0; cur && depth < 8; depth++) {
    const code = (cur as NodeJS.ErrnoException).code;
    if (typeof code === 'string' && codes.includes(code)) return code;
    cur = (cur as { cause?: unknown }).cause;
  }
  return undefined;
}
