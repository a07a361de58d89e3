export { dashboardRoutes } from './dashboard.js';
export { eventRoutes } from './events.js';
export { sandboxRoutes, type SandboxRoutesOptions } from './sandboxes.js';
export { snapshotRoutes } from './snapshots.js';
export { nodeStatusBody, systemRoutes } from './system.js';
export { templateRoutes } from './templates.js';
