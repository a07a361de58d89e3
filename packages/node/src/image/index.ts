export * from './oci/index.js';
export { LayerStore, type LayerMeta } from './layer-store.js';
export { ImageBuildError } from './errors.js';
