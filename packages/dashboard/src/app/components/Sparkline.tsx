interface Props {
  values: number[];
  /** The value at the top of the box. */
  max?: number;
  label: string;
}

/** A small line of recent values, as an SVG path (no inline style: the CSP allows none). */
export function Sparkline({ values, max = 100, label }: Props) {
  const w = 120;
  const h = 28;
  const pts = values.slice(-60);
  const step = pts.length > 1 ? w / (pts.length - 1) : w;
  const d = pts
    .map(
      (v, i) =>
        `${i ? 'L' : 'M'}${(i * step).toFixed(1)},${(h - (Math.min(max, v) / max) * (h - 2) - 1).toFixed(1)}`,
    )
    .join(' ');
  return (
    <svg class="spark" viewBox={`0 0 ${w} ${h}`} role="img" aria-label={label}>
      <path d={d} />
    </svg>
  );
}
