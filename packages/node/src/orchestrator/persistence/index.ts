export { SandboxStore } from './sandbox-store.js';
export { RepositoryPauses } from './repository-pauses.js';
