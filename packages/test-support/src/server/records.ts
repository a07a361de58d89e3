import { SandboxStore, type SandboxRecord } from '@agentenv/node';
import { SANDBOX_RECORD_VERSION } from '@agentenv/node/server';

/**
 * Paused sandbox records written straight into a node's record database: 500 real gVisor
 * sandboxes do not fit on this machine, but the node lists, filters and pages these exactly as
 * it would real paused ones (they hold no capture, so they cannot be resumed). Returns their ids.
 */
export function seedPausedRecords(dbFile: string, count: number): { ids: string[]; remove: () => void } {
  const store = new SandboxStore(dbFile);
  const ids: string[] = [];
  const base = Date.now() - count * 1000;
  try {
    for (let i = 0; i < count; i++) {
      const id = `seed${String(i).padStart(5, '0')}${'x'.repeat(11)}`;
      const at = new Date(base + i * 1000);
      const rec: SandboxRecord = {
        version: SANDBOX_RECORD_VERSION,
        sandboxId: id,
        templateId: 'base',
        state: 'paused',
        startedAt: at.toISOString(),
        endAt: new Date(at.getTime() + 300_000).toISOString(),
        cpuCount: 2,
        memoryMB: 1024,
        diskSizeMB: 2048,
        metadata: { seeded: 'yes', batch: String(i % 5) },
        envVars: {},
        autoPause: true,
        autoResume: false,
        secure: false,
        egress: { allowInternet: true, allowOut: [], denyOut: [] },
        allowPublicTraffic: true,
        envdVersion: '0.0.0',
        pauseId: `seed-pause-${i}`,
      };
      store.insert(rec);
      ids.push(id);
    }
  } finally {
    store.close();
  }
  return {
    ids,
    remove() {
      const s = new SandboxStore(dbFile);
      for (const id of ids) s.delete(id);
      s.close();
    },
  };
}
