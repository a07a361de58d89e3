export { SandboxProxy } from './proxy.js';
export { routeRequest, type SandboxRoute } from '@agentenv/common';
export { signedFilesRoute, type SigningSandbox } from './signed-files.js';
