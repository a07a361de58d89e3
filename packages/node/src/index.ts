/**
 * The node's internals other packages may use: the test fixtures (@agentenv/test-support) and
 * the benches. The server itself starts from main.ts.
 */
export * from './runtime/index.js';
export * from './network/index.js';
export * from './envd/index.js';
export * from './templates/index.js';
export * from './util/index.js';
export { VolumeStore } from './volumes/index.js';
export { SandboxStore, type SandboxRecord } from './orchestrator/index.js';
