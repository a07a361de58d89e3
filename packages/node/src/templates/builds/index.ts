export { BuildRunner, type BuildRunnerDeps, type BuildSpec, type BuildResult } from './runner.js';
export { BuildFiles, checkFilesHash } from './files.js';
export { BuildLog } from './log.js';
export { StepError } from './steps.js';
