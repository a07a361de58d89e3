import { useEffect, useState } from 'preact/hooks';
import type { SandboxEvent, SandboxMetric } from '../../shared/types.js';
import { api, type SandboxDetail as Detail } from '../api.js';
import { Chart } from '../components/Chart.js';
import { SandboxActions } from '../components/SandboxActions.js';
import { useLoad } from '../components/useLoad.js';
import { useNow } from '../components/useNow.js';
import { age, bytes, mib, time, timeLeft } from '../format.js';
import { href, navigate } from '../router.js';
import { LiveStream } from '../stream.js';

/** The last five minutes of the samples the node takes every few seconds. */
const POINTS = 150;
const CHART_SECS = 300;

/** One sandbox: its settings, live CPU/memory charts, lifecycle events, logs and actions. */
export function SandboxDetail({ id }: { id: string }) {
  const [tick, setTick] = useState(0);
  const now = useNow(5000);
  const detail = useLoad(() => api.sandbox(id), [id, tick]);
  const events = useLoad(() => api.events(id), [id, tick]);
  const logs = useLoad(() => api.logs(id), [id, tick]);

  const metrics = useSandboxMetrics(id, () => setTick((n) => n + 1));

  const gone = detail.error && !detail.value;
  const d = detail.value;
  return (
    <section class="view detail">
      <p>
        <a href={href('sandboxes')}>← Sandboxes</a>
      </p>
      <h1 class="mono">{id}</h1>
      {gone && (
        <p class="error" role="alert">
          {detail.error}
        </p>
      )}
      {d && (
        <>
          <div class="detail-head">
            <span class={`badge state-${d.state}`} data-testid="detail-state">
              {d.state}
            </span>
            <SandboxActions
              sandboxID={id}
              state={d.state}
              full
              onDone={(a) => (a === 'kill' ? navigate(href('sandboxes')) : setTick((n) => n + 1))}
            />
          </div>
          <Facts d={d} now={now} />
        </>
      )}
      <MetricCharts metrics={metrics} />
      {d?.state === 'paused' && <p class="muted">A paused sandbox reports no metrics until it is resumed.</p>}
      <div class="split">
        <div>
          <h2>Lifecycle events</h2>
          <EventList events={events.value ?? []} error={events.error} />
        </div>
        <div>
          <h2>Logs</h2>
          {logs.value?.logs.length ? (
            <pre class="logs" aria-label="Logs">
              {logs.value.logs.map((l) => `${time(l.timestamp)}  ${l.line}`).join('\n')}
            </pre>
          ) : (
            <p class="muted">{logs.error && !(detail.error && gone) ? logs.error : 'No log lines.'}</p>
          )}
        </div>
      </div>
    </section>
  );
}

function EventList({ events, error }: { events: SandboxEvent[]; error: string }) {
  if (error) return <p class="muted">{error}</p>;
  if (!events.length) return <p class="muted">No events recorded for this sandbox.</p>;
  return (
    <ul class="events" aria-label="Lifecycle events">
      {events.map((e, i) => (
        <li key={`${i}-${e.timestamp}-${e.type}`} data-event={e.type}>
          <span class="muted">{time(e.timestamp)}</span> <span class={`badge ev-${e.type}`}>{e.type}</span>
          {e.nodeID ? <span class="muted"> on {e.nodeID}</span> : ''}
          {e.reason ? ` (${e.reason})` : ''}
          {e.details && Object.keys(e.details).length ? (
            <span class="mono muted">
              {' '}
              {Object.entries(e.details)
                .map(([k, v]) => `${k}=${v}`)
                .join(' ')}
            </span>
          ) : (
            ''
          )}
        </li>
      ))}
    </ul>
  );
}

/**
 * This sandbox's own stream: its envd's metrics every few seconds (after what the node sampled
 * before the page opened), and `onChange` for each of its lifecycle events.
 */
function useSandboxMetrics(id: string, onChange: () => void): SandboxMetric[] {
  const [metrics, setMetrics] = useState<SandboxMetric[]>([]);
  useEffect(() => {
    setMetrics([]);
    // What the node sampled before this page opened, then each new sample from the stream.
    const add = (more: SandboxMetric[]) =>
      setMetrics((all) => {
        const seen = new Set(all.map((m) => m.timestampUnix));
        return [...all, ...more.filter((m) => !seen.has(m.timestampUnix))]
          .sort((a, b) => a.timestampUnix - b.timestampUnix)
          .slice(-POINTS);
      });
    api.metrics(id).then(add, () => undefined);
    const s = new LiveStream(
      `/dashboard/api/stream?sandboxID=${encodeURIComponent(id)}`,
      (event, data) => {
        if (event === 'sandbox') onChange();
        else if (event === 'sandbox-metrics' && data) add([data as SandboxMetric]);
      },
      () => undefined,
    ).start();
    return () => s.close();
  }, [id]);
  return metrics;
}

/** What the sandbox was created with and how long it has left. */
function Facts({ d, now }: { d: Detail; now: number }) {
  return (
    <dl class="facts">
      <dt>Template</dt>
      <dd>{d.alias ?? d.templateID}</dd>
      <dt>Started</dt>
      <dd>
        {new Date(d.startedAt).toLocaleString()} ({age(d.startedAt, now)} ago)
      </dd>
      <dt>Time left</dt>
      <dd>{timeLeft(d.endAt, d.state, now)}</dd>
      <dt>Resources</dt>
      <dd>
        {d.cpuCount} vCPU · {mib(d.memoryMB)} memory · {mib(d.diskSizeMB)} disk
      </dd>
      <dt>On timeout</dt>
      <dd>
        {d.lifecycle?.onTimeout ?? '–'}
        {d.lifecycle?.autoResume ? ', resumes on traffic' : ''}
      </dd>
      <dt>Network</dt>
      <dd>
        internet {d.allowInternetAccess === false ? 'denied' : 'allowed'}
        {d.network?.allowOut?.length ? ` · allow ${d.network.allowOut.join(', ')}` : ''}
        {d.network?.denyOut?.length ? ` · deny ${d.network.denyOut.join(', ')}` : ''}
      </dd>
      <dt>Metadata</dt>
      <dd class="meta">
        {Object.entries(d.metadata).length
          ? Object.entries(d.metadata)
              .map(([k, v]) => `${k}=${v}`)
              .join(' ')
          : '–'}
      </dd>
    </dl>
  );
}

/** CPU and memory of the last five minutes. */
function MetricCharts({ metrics }: { metrics: SandboxMetric[] }) {
  const x = metrics.map((m) => m.timestampUnix);
  return (
    <div class="charts">
      <Chart
        title="CPU used"
        x={x}
        series={[{ label: 'CPU %', color: '#5eb1ff', values: metrics.map((m) => m.cpuUsedPct) }]}
        unit={(v) => `${v.toFixed(0)} %`}
        windowSecs={CHART_SECS}
      />
      <Chart
        title="Memory used"
        x={x}
        series={[
          { label: 'used', color: '#6fdc8c', values: metrics.map((m) => m.memUsed) },
          { label: 'total', color: '#8a94a6', values: metrics.map((m) => m.memTotal) },
        ]}
        unit={(v) => bytes(v)}
        windowSecs={CHART_SECS}
      />
    </div>
  );
}
