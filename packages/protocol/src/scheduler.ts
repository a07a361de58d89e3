// The cluster scheduler's service (scheduler.v1), apart from envd's so their names never collide.
export * from './gen/scheduler/v1/scheduler_pb.js';
export { captureKey, startCacheKeys, type StartSource } from './cache-keys.js';
