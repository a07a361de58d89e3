export { DomainError, STATUS, conflict, invalid, notFound, type DomainErrorKind } from './errors.js';
export { errorBody, statusBody, type ErrorResponse } from './http.js';
export { checkApiKey, safeEqual } from './auth.js';
export { createEdgeServer, tlsFiles, type TlsFiles } from './edge-server.js';
export { forwardHeaders, routeRequest, type SandboxRoute } from './sandbox-route.js';
