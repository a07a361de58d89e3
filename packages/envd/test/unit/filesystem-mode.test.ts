import { describe, expect, it } from 'vitest';
import { goFileMode, goModeString, GO_MODE_DIR } from '../../src/filesystem/mode.js';

const str = (stMode: number) => goModeString(goFileMode(stMode));

describe("Go's os.FileMode as E2B's envd sends it", () => {
  it('maps file types to Go mode bits', () => {
    expect(goFileMode(0o100644)).toBe(0o644);
    expect(goFileMode(0o040755)).toBe(GO_MODE_DIR + 0o755);
    expect(goFileMode(0o040755) >>> 0).toBe(0x800001ed);
    expect(goFileMode(0o120777)).toBe(2 ** 27 + 0o777);
  });

  it('formats like FileMode.String()', () => {
    expect(str(0o100644)).toBe('-rw-r--r--');
    expect(str(0o100000)).toBe('----------');
    expect(str(0o040755)).toBe('drwxr-xr-x');
    expect(str(0o120777)).toBe('Lrwxrwxrwx');
    expect(str(0o041777)).toBe('dtrwxrwxrwx');
    expect(str(0o104755)).toBe('urwxr-xr-x');
    expect(str(0o102755)).toBe('grwxr-xr-x');
    expect(str(0o020666)).toBe('Dcrw-rw-rw-');
    expect(str(0o060660)).toBe('Drw-rw----');
    expect(str(0o010644)).toBe('prw-r--r--');
    expect(str(0o140755)).toBe('Srwxr-xr-x');
  });
});
