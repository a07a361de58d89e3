export * from './server-fixture.js';
