export * from './helpers.js';
export * from './stalling-relay.js';
