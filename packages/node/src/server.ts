/**
 * The parts a node is assembled from, for tests that put one together over fakes
 * (@agentenv/test-support/fakes): orchestrator, sources, API, proxy, metrics, configuration,
 * wiring. Apart from index.ts, so that a fixture process importing the node's libraries does not
 * load the server as well.
 */
export * from './orchestrator/index.js';
export * from './sources/index.js';
export { buildApp, errorBody, type AppDeps } from './api/index.js';
export { SandboxProxy, routeRequest, type SandboxRoute, type ProxyTargets } from './proxy/index.js';
export { NodeMetrics, MetricsHistory } from './metrics/index.js';
export { SandboxEventLog, type SandboxEvent } from './cluster/index.js';
export { createDriver, type DriverPlacement } from './wiring/index.js';
export { loadConfig, defaults as defaultConfig, type NodeConfig } from './config/index.js';
