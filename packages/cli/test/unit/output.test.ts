import { describe, expect, it } from 'vitest';
import { formatBytes, formatDuration, formatMap, formatTime } from '../../src/output/format.js';
import { resolveFormat } from '../../src/output/output.js';
import { formatProgress } from '../../src/output/progress.js';
import { displayWidth, renderTable, type Column } from '../../src/output/table.js';

interface Row {
  id: string;
  n: number;
  note: string;
}

const columns: Column<Row>[] = [
  { header: 'ID', value: (r) => r.id },
  { header: 'COUNT', value: (r) => String(r.n), align: 'right' },
  { header: 'NOTE', value: (r) => r.note },
];

describe('renderTable', () => {
  it('aligns columns with two spaces and no trailing blanks', () => {
    const out = renderTable(columns, [
      { id: 'abc', n: 5, note: 'x' },
      { id: 'a', n: 1234, note: '' },
    ]);
    expect(out).toBe(['ID   COUNT  NOTE', 'abc      5  x', 'a     1234'].join('\n') + '\n');
  });

  it('prints the header line for an empty list', () => {
    expect(renderTable(columns, [])).toBe('ID  COUNT  NOTE\n');
  });

  it('keeps every row on one line', () => {
    const out = renderTable(columns, [{ id: 'a\nb', n: 1, note: 'tab\there' }]);
    expect(out.split('\n')).toHaveLength(3);
    expect(out).toContain('a b');
  });

  it('measures width without ANSI colours', () => {
    expect(displayWidth('\x1b[31mred\x1b[0m')).toBe(3);
    expect(displayWidth('ü')).toBe(1);
  });
});

describe('value formatting', () => {
  it('formats durations', () => {
    expect(formatDuration(-5)).toBe('0s');
    expect(formatDuration(45_000)).toBe('45s');
    expect(formatDuration(725_000)).toBe('12m05s');
    expect(formatDuration(3 * 3600_000 + 120_000)).toBe('3h02m');
    expect(formatDuration(52 * 3600_000)).toBe('2d04h');
  });

  it('formats sizes in binary units', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(20 * 2 ** 20)).toBe('20.0 MiB');
  });

  it('formats maps sorted and times in local time', () => {
    expect(formatMap({ b: '2', a: '1' })).toBe('a=1,b=2');
    expect(formatMap({})).toBe('-');
    expect(formatTime(undefined)).toBe('-');
    expect(formatTime('not a date')).toBe('not a date');
    expect(formatTime(new Date(2025, 0, 31, 14, 5, 9).toISOString())).toBe('2025-01-31 14:05:09');
  });
});

describe('output format', () => {
  it('is a table on a terminal, JSON when piped, --output wins', () => {
    expect(resolveFormat(undefined, true)).toBe('table');
    expect(resolveFormat(undefined, false)).toBe('json');
    expect(resolveFormat('json', true)).toBe('json');
    expect(resolveFormat('TABLE', false)).toBe('table');
    expect(() => resolveFormat('yaml', true)).toThrow(/table or json/);
  });
});

describe('progress line', () => {
  it('shows bar, percentage, sizes and file count', () => {
    const line = formatProgress({
      label: 'upload',
      done: 512,
      total: 1024,
      width: 80,
      files: { done: 1, total: 3 },
    });
    expect(line).toMatch(/^upload \[#+-+\] {2}50% {2}512 B \/ 1\.0 KiB {2}1\/3 files$/);
    expect(line.length).toBeLessThanOrEqual(80);
  });

  it('is full for an empty transfer and caps at 100%', () => {
    expect(formatProgress({ label: 'x', done: 0, total: 0, width: 60 })).toContain('100%');
    expect(formatProgress({ label: 'x', done: 20, total: 10, width: 60 })).toContain('100%');
  });
});
