export { EnvdClient, initDefaults, type EnvdApi, type EnvdConnector, type ExecRequest } from './client.js';
export {
  loadToolsBundle,
  envdInitArgs,
  ensureToolsLayer,
  defaultToolsDir,
  envdVersion,
  TOOLS_SANDBOX_PATH,
  type ToolsBundle,
} from './tools.js';
