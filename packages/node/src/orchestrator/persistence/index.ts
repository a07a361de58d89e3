export { SandboxStore } from './sandbox-store.js';
export { RepositoryPauses } from './repository-pauses.js';
export { LocalCaptureDirs } from './capture-dirs.js';
export { PauseSealer } from './stored-pause.js';
