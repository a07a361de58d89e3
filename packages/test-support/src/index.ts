export { eventually, type EventuallyOptions } from './eventually.js';
export { pidAlive } from './processes.js';
export { descendants, environOf, faultOnSigusr2 } from './faults.js';
