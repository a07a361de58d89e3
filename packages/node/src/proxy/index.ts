export { SandboxProxy } from './proxy.js';
export { routeRequest, type SandboxRoute } from './route.js';
export { signedFilesRoute, type SigningSandbox } from './signed-files.js';
