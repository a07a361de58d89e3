export { SandboxProxy } from './proxy.js';
export { routeRequest, type SandboxRoute } from './route.js';
