export * from './server-fixture.js';
export * from './records.js';
export * from './via-host.js';
export * from './s3-behind-relay.js';
