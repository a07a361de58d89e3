export { mustRun, run, terminate, until, type RunResult } from '@agentenv/test-support';
