import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';

export interface ChartSeries {
  label: string;
  /** A CSS class colour name from styles.css' palette: uPlot needs the value itself. */
  color: string;
  values: (number | null)[];
}

interface Props {
  title: string;
  /** Unix seconds. */
  x: number[];
  series: ChartSeries[];
  unit: (v: number) => string;
  /** The x axis always spans this many seconds up to the newest point (or now, with none). */
  windowSecs: number;
  height?: number;
}

/**
 * A uPlot time-series chart sized to its container. The chart is made once and fed new data
 * as it comes; a resize observer keeps its width.
 */
export function Chart({ title, x, series, unit, windowSecs, height = 180 }: Props) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const labels = series.map((s) => `${s.label}:${s.color}`).join('|');

  useEffect(() => {
    const el = box.current!;
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height,
      legend: { show: true },
      cursor: { drag: { x: false, y: false } },
      scales: {
        x: {
          time: true,
          range: (_u, _min, max) => {
            const end = Number.isFinite(max) && max > 0 ? max : Date.now() / 1000;
            // A little room on the right, so the newest point is not cut in half by the edge.
            return [end - windowSecs, end + windowSecs / 50];
          },
        },
      },
      axes: [
        {
          stroke: '#8a94a6',
          grid: { stroke: '#2a3140' },
          ticks: { stroke: '#2a3140' },
          space: 70,
          // One line of clock time: uPlot's default puts the date under the first tick, which
          // collides with the second at these widths.
          values: (_u, splits) => splits.map((s) => clock(s, windowSecs <= 600)),
        },
        {
          stroke: '#8a94a6',
          grid: { stroke: '#2a3140' },
          ticks: { stroke: '#2a3140' },
          size: 64,
          values: (_u, vals) => vals.map((v) => unit(v)),
        },
      ],
      series: [
        {},
        ...series.map((s) => ({
          label: s.label,
          stroke: s.color,
          width: 2,
          spanGaps: false,
          points: { show: true, size: 4 },
          value: (_u: uPlot, v: number | null) => (v === null ? '–' : unit(v)),
        })),
      ],
    };
    plot.current = new uPlot(opts, [x, ...series.map((s) => s.values)], el);
    const ro = new ResizeObserver(() =>
      plot.current?.setSize({ width: Math.max(200, el.clientWidth), height }),
    );
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
    // The chart is rebuilt only when its series change; data changes go through setData below.
  }, [labels, height, windowSecs]);

  useEffect(() => {
    plot.current?.setData([x, ...series.map((s) => s.values)]);
  }, [x, series]);

  return (
    <figure class="chart" data-points={x.length}>
      <figcaption>{title}</figcaption>
      <div ref={box} class="chart-box" />
    </figure>
  );
}

function clock(unixSecs: number, seconds: boolean): string {
  const d = new Date(unixSecs * 1000);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(d.getHours())}:${two(d.getMinutes())}${seconds ? `:${two(d.getSeconds())}` : ''}`;
}
