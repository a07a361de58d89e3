export {
  codedError,
  DomainError,
  STATUS,
  conflict,
  invalid,
  isFault,
  notFound,
  unsupported,
  withContext,
  type DomainErrorKind,
  type DomainErrorOptions,
} from './errors.js';
export { errorBody, errorHeaders, statusBody, type ErrorBody, type ErrorResponse } from './http.js';
export { checkApiKey, safeEqual } from './auth.js';
export {
  DEFAULT_STREAM_LIMITS,
  EventStreams,
  type StreamLimits,
  type StreamResponse,
} from './event-streams.js';
export {
  isSecretName,
  keyFromEnv,
  keyInFile,
  logOptions,
  MIN_API_KEY_LENGTH,
  readApiKey,
  requireApiKey,
  REDACTED,
  redactSecrets,
  withoutSecrets,
  type BannerKey,
} from './secrets.js';
export { logFormat, processLogger, silentLog, type Log, type LogFormat, type LogTarget } from './log.js';
export { installProcessPolicy, type PolicyLogger, type ProcessPolicyOptions } from './process-policy.js';
export { createEdgeServer, tlsFiles, type TlsFiles } from './edge-server.js';
export { routeRequest, type SandboxRoute } from './sandbox-route.js';
export { peerLookup } from './peer-lookup.js';
export { copyRawHeaders, forwardHeaders, type HeaderSource } from './forward-headers.js';
export { holdUntilUpgraded, rawAnswerHead, spliceUpgrade, type HeldUpgrade } from './upgrade-relay.js';
export {
  endStreamEnvelope,
  EnvelopeFramer,
  isConnectStream,
  relayConnectStream,
  type StreamError,
} from './connect-stream.js';
export { DEFAULT_TEMPLATE } from './sandbox-defaults.js';
export {
  comparator,
  decodeMergeToken,
  encodeMergeToken,
  mergePage,
  type Compare,
  type Listed,
  type MergePosition,
  type NodeBuffer,
  type NodeCursor,
} from './page-merge.js';
export { nodeOnlyEnvdPath, nodeOnlyEnvdRefusal } from './envd-paths.js';
export { normalizeTarget } from './request-target.js';
export {
  compareListed,
  decodePageCursor,
  DEFAULT_LIST_LIMIT,
  encodePageCursor,
  matchesListQuery,
  MAX_LIST_LIMIT,
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
export { newSandboxId, isSandboxId } from './ids.js';
export { Limiter, forEachLimit } from './limit.js';
export { packageDir, packageVersion } from './package-dir.js';
