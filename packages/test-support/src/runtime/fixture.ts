import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { ensureTemplate, type RuntimeDriver, type Template } from '@agentenv/node';
import { REPO_ROOT } from '../paths.js';
import { createTestNet } from './netns.js';

/** Persistent across runs: the base template takes a minute or two to build the first time. */
export const TEST_HOME = process.env.AENV_TEST_HOME ?? '/var/lib/aenv-test';
export const REPO = REPO_ROOT;
export const TOOLS_DIR = `${REPO}packages/envd/dist-tools`;

/** Builds envd's tools bundle when it is missing (a fresh clone). */
export function ensureToolsBundle(): void {
  if (existsSync(`${TOOLS_DIR}/manifest.json`) && existsSync(`${TOOLS_DIR}/bin/envd`)) return;
  execFileSync('npm', ['run', 'bundle', '-w', '@agentenv/envd'], {
    cwd: REPO,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
}

const log = {
  info: (m: string) => console.log(`[template] ${m}`),
  warn: (m: string) => console.warn(`[template] ${m}`),
};

export async function baseTemplate(driver: RuntimeDriver): Promise<Template> {
  ensureToolsBundle();
  const net = createTestNet();
  try {
    return await ensureTemplate({ home: TEST_HOME, driver, toolsDir: TOOLS_DIR, net, log });
  } finally {
    net.destroy();
  }
}

/** Processes whose command line mentions the id (runsc sandbox, gofer, wrappers). */
export function processesMentioning(id: string): string[] {
  const out = spawnSync('ps', ['-eo', 'pid,args'], { encoding: 'utf8' }).stdout;
  return out.split('\n').filter((l) => l.includes(id) && !l.includes('ps -eo'));
}

export function mountsMentioning(id: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter((l) => l.includes(id));
}

export function runscIds(root: string): string[] {
  const r = spawnSync('runsc', [`--root=${root}`, 'list', '--format=json'], { encoding: 'utf8' });
  try {
    return ((JSON.parse(r.stdout || '[]') ?? []) as { id: string }[]).map((c) => c.id);
  } catch {
    return [];
  }
}
