import { useEffect, useState } from 'preact/hooks';
import { api, describeError, type BuildStatusBody } from '../api.js';
import { useLoad } from '../components/useLoad.js';
import { time } from '../format.js';
import { href } from '../router.js';

/** How often a build under way is asked for new log lines (E2B's build API is polled by design). */
const BUILD_POLL_MS = 1000;

/** A template's builds; the selected one's log, followed while it builds. */
export function TemplateDetail({ id }: { id: string }) {
  const template = useLoad(() => api.template(id), [id]);
  const [buildID, setBuildID] = useState<string | undefined>(undefined);
  const t = template.value;
  const builds = [...(t?.builds ?? [])].sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  const selected = buildID ?? builds[0]?.buildID;
  return (
    <section class="view template">
      <p>
        <a href={href('catalog')}>← Snapshots and templates</a>
      </p>
      <h1 class="mono">{t?.names[0] ?? id}</h1>
      {template.error && (
        <p class="error" role="alert">
          {template.error}
        </p>
      )}
      {t && (
        <p class="muted">
          {t.templateID} · {t.cpuCount} vCPU · {t.memoryMB} MiB · names {t.names.join(', ')}
        </p>
      )}
      <h2>Builds</h2>
      <ul class="builds">
        {builds.map((b) => (
          <li key={b.buildID}>
            <button
              type="button"
              class={b.buildID === selected ? 'link active' : 'link'}
              onClick={() => setBuildID(b.buildID)}
            >
              {b.buildID}
            </button>{' '}
            <span class={`badge build-${b.status}`}>{b.status}</span>{' '}
            <span class="muted">{time(b.createdAt)}</span>
          </li>
        ))}
      </ul>
      {selected && <BuildLog templateID={id} buildID={selected} onChange={() => void template.reload()} />}
    </section>
  );
}

interface BuildLogProps {
  templateID: string;
  buildID: string;
  /** The build's status changed (the list of builds shows it too). */
  onChange: () => void;
}

function BuildLog({ templateID, buildID, onChange }: BuildLogProps) {
  const [status, setStatus] = useState<BuildStatusBody | undefined>(undefined);
  const [lines, setLines] = useState<string[]>([]);
  const [error, setError] = useState('');
  useEffect(() => {
    let offset = 0;
    let stopped = false;
    let last = '';
    let timer: number | undefined;
    setLines([]);
    const step = async () => {
      try {
        const s = await api.buildStatus(templateID, buildID, offset);
        if (stopped) return;
        offset += s.logEntries.length;
        setLines((all) => [...all, ...s.logEntries.map((l) => `${time(l.timestamp)}  ${l.message}`)]);
        setStatus(s);
        if (last && s.status !== last) onChange();
        last = s.status;
        if (s.status === 'waiting' || s.status === 'building') timer = window.setTimeout(step, BUILD_POLL_MS);
      } catch (err) {
        if (!stopped) setError(describeError(err));
      }
    };
    void step();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [templateID, buildID]);
  return (
    <div class="build-log">
      <h3>
        Build {buildID} {status && <span class={`badge build-${status.status}`}>{status.status}</span>}
      </h3>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {status?.reason && (
        <p class="error">
          {status.reason.step ? `step ${status.reason.step}: ` : ''}
          {status.reason.message}
        </p>
      )}
      <pre class="logs" aria-label="Build log">
        {lines.length
          ? lines.join('\n')
          : 'No log lines (a build stored by another node keeps its log there).'}
      </pre>
    </div>
  );
}
