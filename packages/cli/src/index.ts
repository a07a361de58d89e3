export { buildProgram } from './program.js';
export { VERSION } from './version.js';
