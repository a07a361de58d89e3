import { readFile } from 'node:fs/promises';
import type { HostMemory } from './seams.js';

/** MemAvailable from /proc/meminfo. */
export const procMeminfo: HostMemory = {
  async availableBytes() {
    const text = await readFile('/proc/meminfo', 'utf8');
    return Number(/^MemAvailable:\s+(\d+)/m.exec(text)?.[1] ?? 0) * 1024;
  },
};
