export { startEnvd, type EnvdOptions, type RunningEnvd } from './server.js';
export { fileSignature } from './file-signature.js';
