import { formatDuration } from './format.js';

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/**
 * A live status line on a terminal (stderr) with log lines scrolling above it. Without a
 * terminal it prints status changes as plain lines.
 */
export class StatusLine {
  private text = '';
  private frame = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly started = Date.now();

  constructor(
    private readonly stream: NodeJS.WriteStream = process.stderr,
    private readonly live = Boolean(process.stderr.isTTY),
  ) {
    if (live) {
      this.timer = setInterval(() => this.draw(), 100);
      this.timer.unref();
    }
  }

  set(text: string): void {
    if (text === this.text) return;
    this.text = text;
    if (this.live) this.draw();
    else this.stream.write(`${text}\n`);
  }

  /** Prints a line above the status line. */
  log(line: string): void {
    if (this.live) this.stream.write(`\r\x1b[K${line}\n`);
    else this.stream.write(`${line}\n`);
    if (this.live) this.draw();
  }

  stop(final?: string): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (this.live) this.stream.write('\r\x1b[K');
    if (final) this.stream.write(`${final}\n`);
  }

  private draw(): void {
    if (!this.text) return;
    this.frame = (this.frame + 1) % FRAMES.length;
    const elapsed = formatDuration(Date.now() - this.started);
    this.stream.write(`\r\x1b[K${FRAMES[this.frame]} ${this.text} (${elapsed})`);
  }
}
