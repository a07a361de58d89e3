/** Synthetic image layer contents for the OCI benchmarks (bench/pull.ts, bench/templates.ts). */
import { randomBytes } from 'node:crypto';
import type { TarItem } from '@agentenv/test-support/oci';

/** Half compressible (hex text), half not (random bytes): roughly what a distro layer looks like. */
function content(n: number, i: number): Buffer {
  if (i % 2 === 0) return randomBytes(n);
  return Buffer.from(
    randomBytes(Math.ceil(n / 2))
      .toString('hex')
      .slice(0, n),
  );
}

/** `count` files under `prefix` holding `totalBytes`: a few large ones carry half the bytes. */
export function files(prefix: string, count: number, totalBytes: number): TarItem[] {
  const items: TarItem[] = [];
  const large = Math.max(1, Math.floor(count / 500));
  const largeSize = Math.floor(totalBytes / 2 / large);
  const smallSize = Math.max(1, Math.floor(totalBytes / 2 / Math.max(1, count - large)));
  for (let i = 0; i < count; i++) {
    const dir = `${prefix}/d${Math.floor(i / 100)}`;
    if (i % 100 === 0) items.push({ name: `${dir}/`, type: 'directory' });
    items.push({ name: `${dir}/f${i}`, content: content(i < large ? largeSize : smallSize, i) });
  }
  return items;
}
