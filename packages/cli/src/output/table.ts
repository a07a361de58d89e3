/** One column of a table: its header and how a row renders in it. */
export interface Column<T> {
  header: string;
  value: (row: T) => string;
  align?: 'left' | 'right';
}

/** Display width of a string: code points, ignoring ANSI escapes (no wide-character tables). */
export function displayWidth(text: string): number {
  // eslint-disable-next-line no-control-regex
  return [...text.replace(/\x1b\[[0-9;]*m/g, '')].length;
}

/** Newlines and tabs would break the grid; cells are one line. */
function cell(text: string): string {
  return text.replace(/[\r\n\t]+/g, ' ');
}

/**
 * Renders rows as aligned columns separated by two spaces, headers first. The last column is not
 * padded, so lines carry no trailing blanks. An empty list still prints the header line.
 */
export function renderTable<T>(columns: Column<T>[], rows: T[]): string {
  const cells = rows.map((r) => columns.map((c) => cell(c.value(r))));
  const widths = columns.map((c, i) =>
    Math.max(displayWidth(c.header), ...cells.map((r) => displayWidth(r[i]!))),
  );
  const line = (values: string[]) =>
    values
      .map((v, i) => {
        const last = i === values.length - 1;
        const pad = ' '.repeat(widths[i]! - displayWidth(v));
        if (columns[i]!.align === 'right') return pad + v;
        return last ? v : v + pad;
      })
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.header)), ...cells.map(line)].join('\n') + '\n';
}
