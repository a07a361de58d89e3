import { OciError } from './errors.js';
import { formatPlatform, platformMatches, type Platform } from './platform.js';

export const MediaType = {
  ociManifest: 'application/vnd.oci.image.manifest.v1+json',
  ociIndex: 'application/vnd.oci.image.index.v1+json',
  ociConfig: 'application/vnd.oci.image.config.v1+json',
  dockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
  dockerList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  dockerConfig: 'application/vnd.docker.container.image.v1+json',
  dockerSchema1: 'application/vnd.docker.distribution.manifest.v1+json',
  dockerSchema1Signed: 'application/vnd.docker.distribution.manifest.v1+prettyjws',
} as const;

/** What the client accepts from GET /v2/<name>/manifests/<ref>, most specific first. */
export const MANIFEST_ACCEPT = [
  MediaType.ociIndex,
  MediaType.dockerList,
  MediaType.ociManifest,
  MediaType.dockerManifest,
].join(', ');

const LAYER_TYPES = new Set([
  'application/vnd.oci.image.layer.v1.tar',
  'application/vnd.oci.image.layer.v1.tar+gzip',
  'application/vnd.oci.image.layer.v1.tar+zstd',
  'application/vnd.oci.image.layer.nondistributable.v1.tar',
  'application/vnd.oci.image.layer.nondistributable.v1.tar+gzip',
  'application/vnd.oci.image.layer.nondistributable.v1.tar+zstd',
  'application/vnd.docker.image.rootfs.diff.tar.gzip',
  'application/vnd.docker.image.rootfs.foreign.diff.tar.gzip',
]);
const DIGEST = /^sha256:[a-f0-9]{64}$/;

export interface Descriptor {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
  readonly platform?: Platform;
  readonly annotations?: Readonly<Record<string, string>>;
}

export interface ImageManifest {
  readonly kind: 'manifest';
  readonly mediaType: string;
  readonly config: Descriptor;
  readonly layers: readonly Descriptor[];
}

export interface ImageIndex {
  readonly kind: 'index';
  readonly mediaType: string;
  readonly manifests: readonly Descriptor[];
}

/** The parts of an image config a sandbox needs (Docker's `config` object, normalised). */
export interface ImageConfig {
  readonly env: readonly string[];
  readonly cmd: readonly string[] | null;
  readonly entrypoint: readonly string[] | null;
  readonly workingDir: string;
  /** `name`, `uid`, `uid:gid` or `name:group`; empty = root. */
  readonly user: string;
  readonly exposedPorts: readonly string[];
  readonly labels: Readonly<Record<string, string>>;
  readonly stopSignal?: string;
}

export interface ParsedConfig {
  readonly platform: Platform;
  readonly config: ImageConfig;
  /** sha256 of each uncompressed layer, lowest first. */
  readonly diffIds: readonly string[];
}

function fail(what: string, why: string): never {
  throw new OciError('registry_error', `${what}: ${why}`);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function jsonObject(body: Buffer, what: string, kind: string): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = JSON.parse(body.toString('utf8'));
  } catch {
    fail(what, `${kind} is not valid JSON`);
  }
  if (!isObject(doc)) fail(what, `${kind} is not a JSON object`);
  return doc;
}

function descriptor(v: unknown, what: string): Descriptor {
  if (!isObject(v)) fail(what, 'descriptor is not an object');
  const { mediaType, digest, size, platform, annotations } = v;
  if (typeof mediaType !== 'string') fail(what, 'descriptor has no mediaType');
  if (typeof digest !== 'string') fail(what, 'descriptor has no digest');
  if (!DIGEST.test(digest)) {
    if (/^[a-z0-9]+:/.test(digest) && !digest.startsWith('sha256:'))
      throw new OciError(
        'unsupported',
        `${what}: digest algorithm of ${digest} is not supported (only sha256)`,
      );
    fail(what, `malformed digest ${digest}`);
  }
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0)
    fail(what, `bad size for ${digest}`);
  const d: { -readonly [K in keyof Descriptor]: Descriptor[K] } = { mediaType, digest, size };
  if (isObject(platform) && typeof platform.os === 'string' && typeof platform.architecture === 'string') {
    d.platform = {
      os: platform.os,
      architecture: platform.architecture,
      ...(typeof platform.variant === 'string' && platform.variant ? { variant: platform.variant } : {}),
    };
  }
  if (isObject(annotations)) {
    d.annotations = Object.fromEntries(
      Object.entries(annotations).filter((e): e is [string, string] => typeof e[1] === 'string'),
    );
  }
  return d;
}

/**
 * Parses a manifest response: an image manifest (OCI or Docker schema 2) or an index (OCI image
 * index or Docker manifest list). The media type comes from the document, else the response's
 * Content-Type, else its shape. Schema 1 and non-image artifacts are refused with a clear error.
 */
export function parseManifest(
  body: Buffer,
  contentType: string | undefined,
  what: string,
): ImageManifest | ImageIndex {
  const doc = jsonObject(body, what, 'manifest');
  const header = contentType?.split(';')[0]?.trim();
  let mediaType = typeof doc.mediaType === 'string' ? doc.mediaType : header;
  if (!mediaType || mediaType === 'application/json' || mediaType === 'application/octet-stream') {
    mediaType = Array.isArray(doc.manifests)
      ? MediaType.ociIndex
      : Array.isArray(doc.layers)
        ? MediaType.ociManifest
        : mediaType;
  }
  if (
    mediaType === MediaType.dockerSchema1 ||
    mediaType === MediaType.dockerSchema1Signed ||
    doc.schemaVersion === 1
  ) {
    throw new OciError(
      'unsupported',
      `${what}: Docker image manifest schema 1 is not supported (deprecated since 2017); re-push the image with a current Docker or skopeo`,
    );
  }
  if (mediaType === MediaType.ociIndex || mediaType === MediaType.dockerList) {
    if (!Array.isArray(doc.manifests)) fail(what, 'index has no manifests array');
    return {
      kind: 'index',
      mediaType,
      manifests: doc.manifests.map((m, i) => descriptor(m, `${what} manifests[${i}]`)),
    };
  }
  if (mediaType === MediaType.ociManifest || mediaType === MediaType.dockerManifest) {
    if (!Array.isArray(doc.layers)) fail(what, 'manifest has no layers array');
    const config = descriptor(doc.config, `${what} config`);
    if (config.mediaType !== MediaType.ociConfig && config.mediaType !== MediaType.dockerConfig) {
      throw new OciError(
        'unsupported',
        `${what} is not a container image (its config is ${config.mediaType}); only OCI and Docker images can be pulled`,
      );
    }
    const layers = doc.layers.map((l, i) => descriptor(l, `${what} layers[${i}]`));
    for (const l of layers) {
      if (!LAYER_TYPES.has(l.mediaType)) {
        throw new OciError(
          'unsupported',
          `${what}: layer ${l.digest} has unsupported media type ${l.mediaType}`,
        );
      }
    }
    return { kind: 'manifest', mediaType, config, layers };
  }
  throw new OciError('unsupported', `${what}: unsupported manifest media type ${mediaType ?? '(none)'}`);
}

/** Entries of an index that are runnable images (not attestations or unknown/unknown). */
function imageEntries(index: ImageIndex): Descriptor[] {
  return index.manifests.filter(
    (m) =>
      (m.mediaType === MediaType.ociManifest ||
        m.mediaType === MediaType.dockerManifest ||
        m.mediaType === MediaType.ociIndex ||
        m.mediaType === MediaType.dockerList) &&
      m.platform?.os !== 'unknown' &&
      m.annotations?.['vnd.docker.reference.type'] !== 'attestation-manifest',
  );
}

/**
 * The index entry for `wanted`: the first image whose platform matches (an entry without a
 * platform only when it is the sole image). No match is an error naming what the index offers.
 */
export function selectPlatform(index: ImageIndex, wanted: Platform, what: string): Descriptor {
  const entries = imageEntries(index);
  const match = entries.find((m) => m.platform && platformMatches(wanted, m.platform));
  if (match) return match;
  if (entries.length === 1 && !entries[0]?.platform) return entries[0]!;
  const offered = [...new Set(entries.map((m) => (m.platform ? formatPlatform(m.platform) : 'unspecified')))];
  throw new OciError(
    'platform_mismatch',
    `${what} has no image for ${formatPlatform(wanted)}; available platform${offered.length === 1 ? '' : 's'}: ${
      offered.join(', ') || 'none'
    }`,
  );
}

function strings(v: unknown): string[] | null {
  return Array.isArray(v) && v.every((x) => typeof x === 'string') ? (v as string[]) : null;
}

/** Parses an image config blob: the runtime settings, the platform it was built for, its diff ids. */
export function parseConfig(body: Buffer, what: string): ParsedConfig {
  const doc = jsonObject(body, what, 'image config');
  const rootfs = doc.rootfs;
  if (!isObject(rootfs) || rootfs.type !== 'layers' || !Array.isArray(rootfs.diff_ids)) {
    fail(what, 'image config has no rootfs.diff_ids');
  }
  const diffIds = rootfs.diff_ids.map((d) => {
    if (typeof d !== 'string' || !DIGEST.test(d)) fail(what, `bad diff id ${String(d)}`);
    return d;
  });
  const c = isObject(doc.config) ? doc.config : {};
  const labels = isObject(c.Labels)
    ? Object.fromEntries(
        Object.entries(c.Labels).filter((e): e is [string, string] => typeof e[1] === 'string'),
      )
    : {};
  const config: ImageConfig = {
    env: strings(c.Env) ?? [],
    cmd: strings(c.Cmd),
    entrypoint: strings(c.Entrypoint),
    workingDir: typeof c.WorkingDir === 'string' ? c.WorkingDir : '',
    user: typeof c.User === 'string' ? c.User : '',
    exposedPorts: isObject(c.ExposedPorts) ? Object.keys(c.ExposedPorts) : [],
    labels,
    ...(typeof c.StopSignal === 'string' && c.StopSignal ? { stopSignal: c.StopSignal } : {}),
  };
  const platform: Platform = {
    os: typeof doc.os === 'string' ? doc.os : 'linux',
    architecture: typeof doc.architecture === 'string' ? doc.architecture : 'unknown',
    ...(typeof doc.variant === 'string' && doc.variant ? { variant: doc.variant } : {}),
  };
  return { platform, config, diffIds };
}

/** The config's `KEY=value` list as a record (later entries win; entries without `=` are dropped). */
export function envRecord(env: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of env) {
    const eq = e.indexOf('=');
    if (eq > 0) out[e.slice(0, eq)] = e.slice(eq + 1);
  }
  return out;
}
