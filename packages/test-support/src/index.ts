export { eventually, type EventuallyOptions } from './eventually.js';
export { pidAlive } from './processes.js';
