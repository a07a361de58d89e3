/**
 * The image layer beneath the node: OCI image pulls from registries (auth, retries, platforms),
 * bounded layer unpacking, the layer cache, and the layer store every read-only layer of a node
 * lives in (pulled, built or copied).
 */
export {
  ImageStore,
  pullImage,
  layerIdFor,
  type ImageStoreOptions,
  type PullOptions,
  type PullProgress,
  type PulledImage,
} from './pull.js';
export { LayerStore, type LayerMeta, type LayerStoreOptions } from './layer-store.js';
export { ImageBuildError } from './build-error.js';
export { LayerCache, diskUsage, type CacheUsage } from './cache.js';
export { OciError, LayerCacheFullError, OCI_ERROR_KIND, type OciErrorCode } from './errors.js';
export { parseReference, formatReference, type ImageReference } from './reference.js';
export { hostPlatform, parsePlatform, formatPlatform, type Platform } from './platform.js';
export { envRecord, type ImageConfig } from './manifest.js';
export type { Credentials } from './auth.js';
export { imagePasswd, userName } from './image-users.js';
export { readTar, type TarMember } from './tar.js';
export { archiveBudget, DEFAULT_UNPACK_LIMITS, type TarBudget, type UnpackLimits } from './limits.js';
export { safeComponents } from './unpack.js';
