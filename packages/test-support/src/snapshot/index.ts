export * from './helpers.js';
