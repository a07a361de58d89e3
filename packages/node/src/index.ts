/**
 * The node's internals other packages may use: the test fixtures (@agentenv/test-support) and
 * the benches. The server itself starts from main.ts.
 */
export * from './runtime/index.js';
export * from './snapshot/index.js';
export * from './network/index.js';
export * from './image/index.js';
export * from './envd/index.js';
export * from './templates/index.js';
export * from './util/index.js';
export * from './orchestrator/index.js';
export * from './sources/index.js';
export { buildApp, errorBody, type AppDeps } from './api/index.js';
export { SandboxProxy, routeRequest, type SandboxRoute, type ProxyTargets } from './proxy/index.js';
export { NodeMetrics, MetricsHistory } from './metrics/index.js';
export { createDriver, type DriverPlacement } from './wiring/index.js';
export { loadConfig, defaults as defaultConfig, type NodeConfig } from './config/index.js';
