export { VolumeStore, type VolumeInfo, type VolumeStoreOptions } from './store.js';
export { VolumeFiles, type VolumeEntryStat } from './content.js';
export {
  volumeRoutes,
  volumeContentRoutes,
  VOLUME_CONTENT_PREFIX,
  type VolumeRoutesOptions,
} from './routes.js';
export { checkMountList, checkMountPath, checkVolumeName, volumeRelativePath } from './rules.js';
export { VolumeMounts, type VolumeBind } from './mounts.js';
