export {
  codedError,
  DomainError,
  STATUS,
  conflict,
  invalid,
  isFault,
  notFound,
  withContext,
  type DomainErrorKind,
  type DomainErrorOptions,
} from './errors.js';
export { errorBody, errorHeaders, statusBody, type ErrorBody, type ErrorResponse } from './http.js';
export { checkApiKey, safeEqual } from './auth.js';
export { createEdgeServer, tlsFiles, type TlsFiles } from './edge-server.js';
export { normalizeTarget } from './request-target.js';
export { forwardHeaders, routeRequest, type SandboxRoute } from './sandbox-route.js';
export {
  compareListed,
  decodePageCursor,
  DEFAULT_LIST_LIMIT,
  encodePageCursor,
  matchesListQuery,
  MAX_LIST_LIMIT,
  mergePages,
  parseListQuery,
  parseMetadataQuery,
  queryPage,
  type Listable,
  type ListedState,
  type ListOrder,
  type ListPage,
  type PageCursor,
  type RawListQuery,
  type SandboxListQuery,
} from './sandbox-query.js';
