/** Response shapes of the AgentENV / E2B REST API (E2B-COMPAT.md §2, AGENTENV-API.md §1). */

export interface Sandbox {
  sandboxID: string;
  clientID?: string;
  templateID: string;
  alias?: string;
  envdVersion: string;
  envdAccessToken?: string;
  trafficAccessToken?: string;
  domain?: string | null;
}

export type SandboxState = 'running' | 'paused';

export interface ListedSandbox {
  sandboxID: string;
  clientID?: string;
  templateID: string;
  alias?: string;
  startedAt: string;
  endAt: string;
  state: SandboxState;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB?: number;
  envdVersion: string;
  metadata?: Record<string, string>;
}

export interface SandboxDetail extends ListedSandbox {
  domain?: string | null;
  envdAccessToken?: string;
}

export interface ApiErrorBody {
  code: number;
  message: string;
}

export type ForkResult = { sandbox: Sandbox } | { error: ApiErrorBody };

export interface SnapshotInfo {
  snapshotID: string;
  names: string[];
  sandboxID?: string;
  templateID?: string;
  cpuCount?: number;
  memoryMB?: number;
  diskSizeMB?: number;
  createdAt?: string;
  updatedAt?: string;
  /** Whether the shared repository holds it (every node can start from it). */
  stored?: boolean;
}

export interface TemplateBuildSummary {
  buildID: string;
  status: string;
  createdAt?: string;
  updatedAt?: string;
  finishedAt?: string;
}

export interface Template {
  templateID: string;
  buildID?: string;
  names?: string[];
  aliases?: string[];
  public?: boolean;
  cpuCount?: number;
  memoryMB?: number;
  diskSizeMB?: number;
  buildStatus?: string;
  createdAt?: string;
  updatedAt?: string;
  lastSpawnedAt?: string | null;
  spawnCount?: number;
  envdVersion?: string;
  builds?: TemplateBuildSummary[];
}

/** 202 answer of POST /v3/templates. */
export interface TemplateBuildRequest {
  templateID: string;
  buildID: string;
  names?: string[];
  tags?: string[];
  aliases?: string[];
  public?: boolean;
}

export interface BuildLogEntry {
  timestamp: string;
  level: string;
  message: string;
  step?: string;
}

export type BuildState = 'building' | 'waiting' | 'ready' | 'error';

export interface BuildStatus {
  templateID: string;
  buildID: string;
  status: BuildState;
  logEntries: BuildLogEntry[];
  logs?: string[];
  reason?: { message: string; step?: string; logEntries?: BuildLogEntry[] };
}

/** One step of a template build, as the E2B SDK serializes it. */
export interface BuildStep {
  type: 'COPY' | 'RUN' | 'ENV' | 'WORKDIR' | 'USER';
  args: string[];
  force: boolean;
  filesHash?: string;
}

/** Body of POST /v2/templates/{id}/builds/{buildID}. */
export interface BuildSpec {
  fromImage?: string;
  fromTemplate?: string;
  startCmd?: string;
  readyCmd?: string;
  force: boolean;
  steps: BuildStep[];
}
