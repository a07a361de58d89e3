export { eventually, type EventuallyOptions } from './eventually.js';
export { pidAlive } from './processes.js';
export { pathVariants, percentEncoded, probe, type ProbeAnswer, type ProbeRequest } from './probe.js';
