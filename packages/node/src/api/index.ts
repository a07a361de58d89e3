export { buildApp, type AppDeps } from './app.js';
export { errorBody } from './errors.js';
