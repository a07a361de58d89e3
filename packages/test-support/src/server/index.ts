export * from './server-fixture.js';
export * from './records.js';
