export { eventually, until, type EventuallyOptions } from './eventually.js';
export { pidAlive } from './processes.js';
export { connectEnvelope, connectMessages } from './connect-envelopes.js';
export { followStream, openConnections, stalledStream, type FollowedStream } from './event-streams.js';
export { descendants, environOf, faultOnSigusr2 } from './faults.js';
export { pathVariants, percentEncoded, probe, type ProbeAnswer, type ProbeRequest } from './probe.js';
export { stressRounds } from './stress.js';
export { mustRun, run, terminate, type RunResult } from './commands.js';
