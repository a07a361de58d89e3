export { NodeMetrics } from './node-metrics.js';
export { MetricsHistory, MetricsSampler, type UsageSource } from './metrics-history.js';
export { bucketSamples, metricBody, metricsRange, metricsStep } from './metrics-range.js';
