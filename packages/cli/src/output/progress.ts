import { formatBytes } from './format.js';

/** One line of a transfer progress bar: `label [#####-----]  45%  1.2 MiB / 2.7 MiB  3 files`. */
export function formatProgress(p: {
  label: string;
  done: number;
  total: number;
  width: number;
  files?: { done: number; total: number };
}): string {
  const ratio = p.total > 0 ? Math.min(1, p.done / p.total) : 1;
  const pct = `${Math.floor(ratio * 100)}%`.padStart(4);
  const files = p.files && p.files.total > 1 ? `  ${p.files.done}/${p.files.total} files` : '';
  const sizes = `  ${formatBytes(p.done)} / ${formatBytes(p.total)}`;
  const fixed = p.label.length + 4 + pct.length + sizes.length + files.length;
  const barWidth = Math.max(10, Math.min(40, p.width - fixed - 1));
  const filled = Math.round(ratio * barWidth);
  return `${p.label} [${'#'.repeat(filled)}${'-'.repeat(barWidth - filled)}] ${pct}${sizes}${files}`;
}

/** A redrawn progress line on a terminal; silent elsewhere. */
export class Progress {
  private done = 0;
  private filesDone = 0;
  private last = 0;
  private drawn = false;

  constructor(
    private readonly label: string,
    private readonly total: number,
    private readonly fileCount: number,
    private readonly stream: NodeJS.WriteStream = process.stderr,
    private readonly enabled = Boolean(process.stderr.isTTY),
  ) {}

  add(bytes: number): void {
    this.done += bytes;
    this.draw(false);
  }

  fileDone(): void {
    this.filesDone++;
    this.draw(false);
  }

  finish(): void {
    if (!this.enabled) return;
    this.draw(true);
    this.stream.write('\n');
  }

  private draw(force: boolean): void {
    if (!this.enabled) return;
    const now = Date.now();
    if (!force && this.drawn && now - this.last < 100) return;
    this.last = now;
    this.drawn = true;
    const line = formatProgress({
      label: this.label,
      done: this.done,
      total: this.total,
      width: this.stream.columns ?? 80,
      files: { done: this.filesDone, total: this.fileCount },
    });
    this.stream.write(`\r${line}\x1b[K`);
  }
}
