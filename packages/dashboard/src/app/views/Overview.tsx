import { useMemo } from 'preact/hooks';
import { errorsByKind, latency, latencySeries } from '../../shared/stats.js';
import { SANDBOX_STATES, type SandboxEvent } from '../../shared/types.js';
import { WINDOW_MS } from '../../shared/window.js';
import { api } from '../api.js';
import { Chart } from '../components/Chart.js';
import { useLoad } from '../components/useLoad.js';
import { ms, time } from '../format.js';
import { live } from '../live.js';
import { href } from '../router.js';
import { useStore } from '../store.js';
import { useNow } from '../components/useNow.js';

const STEP_MS = 30_000;
const STAGES = [
  { stage: 'create', color: '#5eb1ff' },
  { stage: 'resume', color: '#6fdc8c' },
  { stage: 'fork', color: '#f1c21b' },
] as const;

/** Sandboxes by state, creates per second, latencies of the last 15 minutes, errors, recent events. */
export function Overview() {
  const changes = useStore(live.changes);
  const samples = useStore(live.samples);
  const events = useStore(live.events);
  const now = useNow(5000);
  const summary = useLoad(() => api.summary(), [changes]);
  const counts = summary.value?.counts ?? {};
  const since = now - WINDOW_MS;

  const series = useMemo(
    () =>
      Object.fromEntries(
        STAGES.map(({ stage }) => [stage, latencySeries(samples, stage, now, WINDOW_MS, STEP_MS)]),
      ),
    [samples, now],
  );
  const creates = series.create!;
  const errors = errorsByKind(samples, since);

  return (
    <section class="view overview">
      <h1>Overview</h1>
      {summary.error && (
        <p class="error" role="alert">
          {summary.error}
        </p>
      )}
      <StateCards counts={counts} />
      <div class="stats" aria-label="Latency over the last 15 minutes">
        {STAGES.map(({ stage }) => {
          const l = latency(samples, stage, since);
          return (
            <div class="stat" data-stage={stage} key={stage}>
              <span class="label">{stage}</span>
              <span class="value">
                p50 {ms(l.p50)} · p95 {ms(l.p95)}
              </span>
              <span class="muted">{l.count} in 15 min</span>
            </div>
          );
        })}
      </div>
      <div class="charts">
        <Chart
          title="Creates per second (30 s buckets)"
          x={creates.t}
          series={[{ label: 'creates/s', color: '#5eb1ff', values: creates.rate }]}
          unit={(v) => v.toFixed(2)}
          windowSecs={WINDOW_MS / 1000}
        />
        {STAGES.map(({ stage, color }) => (
          <Chart
            key={stage}
            title={`${stage}: p50 and p95`}
            x={series[stage]!.t}
            series={[
              { label: 'p50', color, values: series[stage]!.p50 },
              { label: 'p95', color: '#ff8389', values: series[stage]!.p95 },
            ]}
            unit={(v) => ms(v)}
            windowSecs={WINDOW_MS / 1000}
          />
        ))}
      </div>
      <div class="split">
        <ErrorsByKind errors={errors} />
        <RecentEvents events={events} />
      </div>
    </section>
  );
}

/** How many sandboxes are in each state, each a link to the list filtered by it. */
function StateCards({ counts }: { counts: Record<string, number> }) {
  return (
    <div class="cards" aria-label="Sandboxes by state">
      {SANDBOX_STATES.map((s) => (
        <a class={`card state-${s}`} href={href('sandboxes', undefined, { state: s })} data-state={s} key={s}>
          <span class="count">{counts[s] ?? 0}</span>
          <span class="label">{s}</span>
        </a>
      ))}
    </div>
  );
}

/** Failed operations of the window, by kind. */
function ErrorsByKind({ errors }: { errors: [string, number][] }) {
  return (
    <div>
      <h2>Errors by kind, last 15 minutes</h2>
      {errors.length === 0 ? (
        <p class="muted">No failed operations.</p>
      ) : (
        <table class="compact" aria-label="Errors by kind">
          <tbody>
            {errors.map(([kind, n]) => (
              <tr key={kind}>
                <th scope="row">{kind}</th>
                <td class="num">{n}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

/** The latest lifecycle events seen since the page opened. */
function RecentEvents({ events }: { events: readonly SandboxEvent[] }) {
  return (
    <div>
      <h2>Recent events</h2>
      {events.length === 0 ? (
        <p class="muted">Nothing has happened since this page opened.</p>
      ) : (
        <ul class="events" aria-label="Recent events">
          {events.slice(0, 12).map((e) => (
            <li key={`${e.sandboxID}-${e.timestamp}-${e.type}`}>
              <span class="muted">{time(e.timestamp)}</span>{' '}
              <span class={`badge ev-${e.type}`}>{e.type}</span>{' '}
              <a href={href('sandboxes', e.sandboxID)}>{e.sandboxID}</a>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
