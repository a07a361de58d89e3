import { seal, sealingKey, unseal } from '../../security/index.js';
import { readSandboxRecord, SandboxRecordError, type SandboxRecord } from '../record.js';
import type { SealedPause, StoredPause } from '../seams.js';

/** The fields of a record that are secrets: E2B users pass API keys as env vars. */
type Secrets = Pick<SandboxRecord, 'envVars' | 'envdAccessToken' | 'trafficAccessToken'>;

const PURPOSE = 'pause-secrets';

/**
 * Seals the secrets of pauses going to the shared repository (AES-256-GCM, bound to the sandbox
 * id) and opens them when a node takes a pause over. The key comes from the installation's API
 * key when one is configured, which every node of a cluster holds (the gateway calls them with
 * it), so any of them can resume the pause; a node without one has no secret it shares, and
 * seals with its own.
 */
export class PauseSealer {
  private readonly key: Buffer;

  constructor(secret: string) {
    this.key = sealingKey(secret, PURPOSE);
  }

  static forNode(apiKey: string | undefined, nodeSecret: string): PauseSealer {
    return new PauseSealer(apiKey ?? nodeSecret);
  }

  seal(rec: SandboxRecord): SealedPause {
    const { state: _s, handle: _h, captureDir: _c, pauseId: _p, uploadPending: _u, ...paused } = rec;
    const { envVars, envdAccessToken, trafficAccessToken, ...sandbox } = paused;
    const secrets: Secrets = {
      envVars,
      ...(envdAccessToken !== undefined ? { envdAccessToken } : {}),
      ...(trafficAccessToken !== undefined ? { trafficAccessToken } : {}),
    };
    return { sandbox, sealed: seal(this.key, JSON.stringify(secrets), rec.sandboxId) };
  }

  /** The paused record of a stored pause, its secrets opened. */
  open(pauseId: string, stored: StoredPause): SandboxRecord {
    const where = `pause ${pauseId} of sandbox ${stored.sandbox.sandboxId}`;
    const rec = readSandboxRecord({ ...stored.sandbox, state: 'paused', pauseId }, where);
    if (stored.sealed === undefined) return rec;
    const text = unseal(this.key, stored.sealed, rec.sandboxId);
    if (text === undefined) {
      throw new SandboxRecordError(
        `${where} was sealed with another key: nodes that resume each other's pauses need the same ` +
          'API key (AENV_API_KEY or AENV_API_KEY_FILE)',
      );
    }
    return { ...rec, ...readSecrets(JSON.parse(text) as unknown, where) };
  }
}

const isStringMap = (v: unknown): v is Record<string, string> =>
  typeof v === 'object' &&
  v !== null &&
  !Array.isArray(v) &&
  Object.values(v).every((s) => typeof s === 'string');

function readSecrets(value: unknown, where: string): Secrets {
  const v = value as Partial<Record<keyof Secrets, unknown>>;
  const tokenOk = (t: unknown) => t === undefined || typeof t === 'string';
  if (!isStringMap(v?.envVars) || !tokenOk(v.envdAccessToken) || !tokenOk(v.trafficAccessToken))
    throw new SandboxRecordError(`${where}: damaged secrets`);
  return v as Secrets;
}
