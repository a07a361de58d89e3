export { SandboxProxy, type ProxyTargets } from './proxy.js';
export { sandboxNotFound, errorResponseText, sendError } from './answers.js';
export { SANDBOX_PAGE_CSP } from './headers.js';
export { routeRequest, type SandboxRoute } from '@agentenv/common';
export { signedFilesRoute, type SigningSandbox } from './signed-files.js';
