export { SandboxProxy, sandboxNotFound, errorResponseText, sendError, type ProxyTargets } from './proxy.js';
export { routeRequest, type SandboxRoute } from '@agentenv/common';
export { signedFilesRoute, type SigningSandbox } from './signed-files.js';
