export {
  ENVD_PORT,
  ENVD_URL,
  ensureTestUser,
  startEnvdProcess,
  initEnvd,
  type EnvdProcess,
} from './envd-fixture.js';
