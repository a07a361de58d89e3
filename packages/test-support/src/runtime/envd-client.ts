import { toJson } from '@bufbuild/protobuf';
import { EnvdClient as NodeEnvdClient, requestOnce } from '@agentenv/node';
import { EntryInfoSchema, Filesystem } from '@agentenv/protocol';

const TIMEOUT_MS = 30_000;

export interface HttpResult {
  status: number;
  body: Buffer;
}

/** One request to a sandbox port on a connection of its own, reset afterwards (as the node does). */
export function httpCall(
  host: string,
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Buffer,
  timeoutMs = TIMEOUT_MS,
): Promise<HttpResult> {
  return requestOnce({ host, port, method, path, headers, timeoutMs, ...(body ? { body } : {}) });
}

/** The node's envd client with what the runtime tests ask of a sandbox besides. */
export class EnvdClient extends NodeEnvdClient {
  constructor(host: string, port: number) {
    super(host, port, TIMEOUT_MS);
  }

  /** An entry as envd's JSON names it (`type` is e.g. FILE_TYPE_DIRECTORY). */
  async stat(path: string): Promise<{ name: string; type: string }> {
    const { entry } = await this.connectClient(Filesystem).stat({ path });
    if (!entry) throw new Error(`Stat ${path}: no entry`);
    return toJson(EntryInfoSchema, entry) as { name: string; type: string };
  }

  /** Runs a command with bash to completion, collecting its output. */
  async run(cmd: string, user = 'root'): Promise<{ stdout: string; stderr: string; exitCode: number }> {
    let stdout = '';
    let stderr = '';
    const exitCode = await this.exec({
      cmd,
      user,
      shell: '/bin/bash',
      timeoutMs: TIMEOUT_MS,
      onOutput: (text, stream) => (stream === 'stdout' ? (stdout += text) : (stderr += text)),
    });
    return { stdout, stderr, exitCode };
  }

  upload(path: string, data: Buffer, user = 'root'): Promise<void> {
    return this.writeFile(path, data, user);
  }

  async download(path: string, user = 'root'): Promise<Buffer> {
    const data = await this.readFile(path, user);
    if (!data) throw new Error(`download ${path}: 404`);
    return data;
  }
}
