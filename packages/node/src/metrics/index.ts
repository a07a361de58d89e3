export { NodeMetrics } from './node-metrics.js';
