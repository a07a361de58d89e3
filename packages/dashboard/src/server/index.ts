/**
 * The dashboard's server side: its built pages (for a node's Fastify app or any node:http
 * server) and what a node feeds its live views with. The app itself is in ../app.
 */
export {
  CONTENT_SECURITY_POLICY,
  DASHBOARD_API_PATH,
  DASHBOARD_PATH,
  DashboardAssets,
  dashboardDir,
  isDashboardPage,
  type AssetResponse,
} from './assets.js';
export { dashboardPageHandler } from './http.js';
export { LifecycleActivity, WINDOW_MS } from './activity.js';
export { toSandboxEvent } from '../shared/events.js';
export { EventStreamParser, formatEvent } from '../shared/sse.js';
export { redactSecrets } from '../shared/redact.js';
export type * from '../shared/types.js';
export { SANDBOX_STATES } from '../shared/types.js';
export { clusterDashboardHandler, type ClusterDashboardOptions, type ClusterNode } from './cluster.js';
export { mergeCatalogs, mergePages, mergeSummaries } from './merge.js';
