interface Props {
  values: number[];
  /** The value at the top of the box, unless a value is higher. */
  max?: number;
  label: string;
  unit?: string;
}

/** A small line of recent values, as an SVG path (no inline style: the CSP allows none). */
export function Sparkline({ values, max: atLeast = 100, label, unit = '%' }: Props) {
  const w = 120;
  const h = 28;
  const pts = values.slice(-60);
  const max = Math.max(atLeast, ...pts);
  const last = pts[pts.length - 1];
  const step = pts.length > 1 ? w / (pts.length - 1) : w;
  const d = pts
    .map(
      (v, i) =>
        `${i ? 'L' : 'M'}${(i * step).toFixed(1)},${(h - (Math.min(max, v) / max) * (h - 2) - 1).toFixed(1)}`,
    )
    .join(' ');
  return (
    <span class="spark-wrap">
      <svg class="spark" viewBox={`0 0 ${w} ${h}`} role="img" aria-label={label}>
        <rect class="spark-bg" x="0" y="0" width={w} height={h} />
        <path d={d} />
      </svg>
      <span class="spark-value">{last === undefined ? '–' : `${Math.round(last)} ${unit}`}</span>
    </span>
  );
}
