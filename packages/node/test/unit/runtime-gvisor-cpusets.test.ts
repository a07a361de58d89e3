import { describe, expect, it } from 'vitest';
import { buildOciSpec } from '../../src/runtime/gvisor/oci-spec.js';
import { CpuPlacer, parseCpuList } from '../../src/runtime/gvisor/cpusets.js';

describe('parseCpuList', () => {
  it('reads the kernel CPU list format', () => {
    expect(parseCpuList('0-1\n')).toEqual([0, 1]);
    expect(parseCpuList('0-2,5,8-9')).toEqual([0, 1, 2, 5, 8, 9]);
    expect(parseCpuList('3')).toEqual([3]);
    expect(() => parseCpuList('0-x')).toThrow(/bad CPU list/);
  });
});

describe('CpuPlacer', () => {
  it('spreads single-CPU sandboxes over the least used CPUs', () => {
    const p = new CpuPlacer([0, 1, 2, 3]);
    const got = Array.from({ length: 6 }, () => p.place(1));
    expect(got).toEqual([[0], [1], [2], [3], [0], [1]]);
    p.release([2]);
    expect(p.place(1)).toEqual([2]);
    expect([...p.counts().values()]).toEqual([2, 2, 1, 1]);
  });

  it('gives a multi-CPU sandbox that many distinct CPUs, and none to one as large as the host', () => {
    const p = new CpuPlacer([0, 1, 2, 3]);
    expect(p.place(1)).toEqual([0]);
    expect(p.place(2)).toEqual([1, 2]);
    expect(p.place(1.5)).toEqual([0, 3]);
    expect(p.place(4)).toBeUndefined();
    expect(new CpuPlacer([0]).place(1)).toBeUndefined();
  });

  it('ignores releases of what it never placed', () => {
    const p = new CpuPlacer([0, 1]);
    p.release([1]);
    p.release(undefined);
    expect([...p.counts().values()]).toEqual([0, 0]);
  });
});

describe('buildOciSpec cpuset', () => {
  const input = {
    rootfs: '/r',
    init: { args: ['/bin/envd'] },
    mounts: [],
    resources: { cpuCount: 1, memoryMB: 512, diskSizeMB: 512 },
    hostname: 'aenv',
    cgroupsPath: '/aenv/aenv-0123456789abcdef0123',
    upperInMemory: true,
  };
  type Cpu = { linux: { resources: { cpu: { cpus?: string } } } };

  it('pins to the placed CPUs only when given', () => {
    expect((buildOciSpec({ ...input, cpus: [1, 3] }) as Cpu).linux.resources.cpu.cpus).toBe('1,3');
    expect((buildOciSpec(input) as Cpu).linux.resources.cpu.cpus).toBeUndefined();
  });
});
