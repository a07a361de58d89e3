export * from './fixture.js';
export * from './netns.js';
export * from './envd-client.js';
