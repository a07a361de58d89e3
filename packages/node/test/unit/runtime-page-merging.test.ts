import { describe, expect, it } from 'vitest';
import { PageMerging, SCANS_TO_SETTLE, type KsmFiles } from '../../src/runtime/gvisor/page-merging.js';

/** KSM's control files as a map; `writes` records what was written to `run`. */
function fakeKsm(run: string | null) {
  const files = new Map<string, string>(
    run === null
      ? []
      : [
          ['run', run],
          ['full_scans', '7'],
        ],
  );
  const writes: string[] = [];
  let marked = false;
  const ksm: KsmFiles = {
    marked: async () => marked,
    mark: async (on) => {
      marked = on;
    },
    read: async (name) => {
      const v = files.get(name);
      if (v === undefined) throw new Error(`ENOENT ${name}`);
      return `${v}\n`;
    },
    write: async (name, value) => {
      if (name === 'run') writes.push(value);
      files.set(name, value);
    },
  };
  const scan = (n = 1) => files.set('full_scans', String(Number(files.get('full_scans')) + n));
  return { ksm, writes, scan, marked: () => marked, markNow: () => (marked = true) };
}

describe('page merging (ksmd run while there is something new to merge)', () => {
  it('starts ksmd for a new sandbox and stops it once it scanned everything enough times', async () => {
    const f = fakeKsm('0');
    const m = (await PageMerging.open(f.ksm))!;
    await m.changed();
    expect(f.writes).toEqual(['1']);
    f.scan(SCANS_TO_SETTLE - 1);
    await m.settleOnce();
    expect(m.running).toBe(true);
    f.scan();
    await m.settleOnce();
    expect(f.writes).toEqual(['1', '0']);
    expect(m.running).toBe(false);
    expect(f.marked()).toBe(false);
    await m.close();
    expect(f.writes).toEqual(['1', '0']);
  });

  it('a sandbox started while ksmd runs gets its full scans too', async () => {
    const f = fakeKsm('0');
    const m = (await PageMerging.open(f.ksm))!;
    await m.changed();
    f.scan(2);
    await m.changed();
    f.scan(SCANS_TO_SETTLE - 1);
    await m.settleOnce();
    expect(m.running).toBe(true);
    f.scan();
    await m.settleOnce();
    expect(f.writes).toEqual(['1', '0']);
    await m.close();
  });

  it('starts ksmd again when another node stopped it before its scans were done', async () => {
    const f = fakeKsm('0');
    const m = (await PageMerging.open(f.ksm))!;
    await m.changed();
    await f.ksm.write('run', '0');
    await m.settleOnce();
    expect(f.writes.at(-1)).toBe('1');
    await m.close();
  });

  it('stops ksmd at close when it still runs for the node', async () => {
    const f = fakeKsm('0');
    const m = (await PageMerging.open(f.ksm))!;
    await m.changed();
    await m.close();
    expect(f.writes).toEqual(['1', '0']);
    await m.changed();
    expect(f.writes).toEqual(['1', '0']);
  });

  it('stops a ksmd its crashed predecessor left running, and owns it from then on', async () => {
    const f = fakeKsm('1');
    f.markNow();
    const m = (await PageMerging.open(f.ksm))!;
    expect(f.writes).toEqual(['0']);
    expect(f.marked()).toBe(false);
    await m.changed();
    expect(f.writes).toEqual(['0', '1']);
    expect(f.marked()).toBe(true);
    await m.close();
    expect(f.marked()).toBe(false);
  });

  it('leaves a ksmd the host runs on its own alone, and is null without KSM', async () => {
    const f = fakeKsm('1');
    const m = (await PageMerging.open(f.ksm))!;
    await m.changed();
    await m.close();
    expect(f.writes).toEqual([]);
    expect(await PageMerging.open(fakeKsm(null).ksm)).toBeNull();
  });
});
