export { SandboxProxy, sandboxNotFound, errorResponseText, type ProxyTargets } from './proxy.js';
export { routeRequest, type SandboxRoute } from './route.js';
