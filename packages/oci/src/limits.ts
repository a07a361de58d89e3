import { fmtBytes, OciError } from './errors.js';

/**
 * What a pull may unpack: a small compressed blob can inflate to any size and any number of
 * files, so each layer and the whole image are bounded in uncompressed bytes and in entries.
 * Each bound names the node setting (`[image]` in the config) that raises it.
 */
export interface UnpackLimits {
  readonly layerBytes: number;
  readonly layerEntries: number;
  readonly imageBytes: number;
  readonly imageEntries: number;
}

export const DEFAULT_UNPACK_LIMITS: UnpackLimits = {
  layerBytes: 20 * 2 ** 30,
  layerEntries: 1_000_000,
  imageBytes: 50 * 2 ** 30,
  imageEntries: 2_000_000,
};

/** What one tar archive is charged as it is read; each call throws once a limit is passed. */
export interface TarBudget {
  /** `n` more bytes of the uncompressed archive. */
  bytes(n: number): void;
  /** One more entry. */
  entry(): void;
}

/** The budget of one archive on its own: `over` makes the error once a bound is passed. */
export function archiveBudget(
  max: { readonly bytes: number; readonly entries: number },
  over: (passed: 'bytes' | 'entries') => Error,
): TarBudget {
  let bytes = 0;
  let entries = 0;
  return {
    bytes: (n) => {
      if ((bytes += n) > max.bytes) throw over('bytes');
    },
    entry: () => {
      if (++entries > max.entries) throw over('entries');
    },
  };
}

/** A layer's recorded totals, as its layer.json keeps them. */
export interface LayerTotals {
  readonly entries: number;
  /** Size of the uncompressed archive (absent in layers unpacked before it was recorded). */
  readonly archiveBytes?: number;
  /** Disk use, which stands in for archiveBytes where that is absent. */
  readonly bytes: number;
}

function over(what: string, limit: string, setting: string): OciError {
  return new OciError('over_limit', `${what} has more than ${limit} (the node's limit, [image] ${setting})`);
}

/** The uncompressed bytes and entries of one image's pull, against `limits`. */
export class ImageBudget {
  private bytes = 0;
  private entries = 0;

  constructor(
    private readonly limits: UnpackLimits,
    private readonly image: string,
  ) {}

  /** The budget of one layer (`what` names it): what it unpacks counts for it and for the image. */
  layer(what: string): TarBudget {
    const l = this.limits;
    const own = archiveBudget({ bytes: l.layerBytes, entries: l.layerEntries }, (kind) =>
      kind === 'bytes'
        ? over(what, `${fmtBytes(l.layerBytes)} uncompressed`, 'max_layer_mb')
        : over(what, `${l.layerEntries} entries`, 'max_layer_entries'),
    );
    return {
      bytes: (n) => {
        own.bytes(n);
        this.checkBytes((this.bytes += n));
      },
      entry: () => {
        own.entry();
        this.checkEntries(++this.entries);
      },
    };
  }

  /** Checks the image as its layers, unpacked now or by an earlier pull, recorded themselves. */
  checkTotals(layers: readonly LayerTotals[]): void {
    this.checkBytes(layers.reduce((a, t) => a + (t.archiveBytes ?? t.bytes), 0));
    this.checkEntries(layers.reduce((a, t) => a + t.entries, 0));
  }

  private checkBytes(n: number): void {
    const max = this.limits.imageBytes;
    if (n > max) throw over(this.image, `${fmtBytes(max)} uncompressed in its layers`, 'max_image_mb');
  }

  private checkEntries(n: number): void {
    const max = this.limits.imageEntries;
    if (n > max) throw over(this.image, `${max} entries in its layers`, 'max_image_entries');
  }
}
