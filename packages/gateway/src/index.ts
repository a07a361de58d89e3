export { loadGatewayConfig, type GatewayConfig } from './config.js';
export { startGateway, type RunningGateway } from './gateway.js';
export type { Scheduler } from './scheduler/scheduler.js';
