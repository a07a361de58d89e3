export { nodeApiKey, type NodeApiKey } from './api-key.js';
export { loadOrCreateSecret, newApiKey, newNodeSecret } from './secrets.js';
export { envdAccessToken, trafficAccessToken } from './tokens.js';
export { seal, sealingKey, unseal } from './sealing.js';
