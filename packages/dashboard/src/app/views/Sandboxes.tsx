import { useEffect, useState } from 'preact/hooks';
import { SANDBOX_STATES, type DashboardSandbox } from '../../shared/types.js';
import { api, type SandboxFilter } from '../api.js';
import { SandboxActions } from '../components/SandboxActions.js';
import { useLoad } from '../components/useLoad.js';
import { useNow } from '../components/useNow.js';
import { age, mib, pct, timeLeft } from '../format.js';
import { live } from '../live.js';
import { href, navigate, type Route } from '../router.js';
import { useStore } from '../store.js';

const PAGE = 25;

const filterOf = (q: URLSearchParams): SandboxFilter => ({
  state: q.get('state') ?? '',
  template: q.get('template') ?? '',
  q: q.get('q') ?? '',
  metadata: q.get('metadata') ?? '',
});

/**
 * Sandboxes, filtered and paged by the server (25 a page), refreshed when the stream reports a
 * lifecycle event rather than on a timer. Filters and the page live in the URL.
 */
export function Sandboxes({ route }: { route: Route }) {
  const changes = useStore(live.changes);
  const now = useNow(5000);
  const filter = filterOf(route.query);
  const offset = Math.max(0, Number(route.query.get('offset')) || 0);
  const [draft, setDraft] = useState(filter);
  useEffect(() => setDraft(filter), [route.query.toString()]);
  const page = useLoad(() => api.sandboxes(filter, offset, PAGE), [route.query.toString(), changes]);
  const go = (f: SandboxFilter, off: number) => {
    navigate(
      href('sandboxes', undefined, { ...(f as Record<string, string>), offset: off ? String(off) : '' }),
    );
    window.scrollTo(0, 0);
  };
  const p = page.value;

  return (
    <section class="view sandboxes">
      <h1>Sandboxes</h1>
      <FilterForm draft={draft} setDraft={setDraft} go={go} />
      {page.error && (
        <p class="error" role="alert">
          {page.error}
        </p>
      )}
      <div class="table-wrap">
        <table class="list" aria-label="Sandboxes">
          <thead>
            <tr>
              <th>Sandbox</th>
              <th>State</th>
              <th>Template</th>
              <th class="wide">Node</th>
              <th class="wide">Metadata</th>
              <th>Age</th>
              <th>Left</th>
              <th class="num">CPU</th>
              <th class="num">Memory</th>
              <th class="wide" />
            </tr>
          </thead>
          <tbody>
            {p?.items.map((s) => (
              <SandboxRow key={s.sandboxID} s={s} now={now} onDone={() => void page.reload()} />
            ))}
          </tbody>
        </table>
      </div>
      {p && p.items.length === 0 && <p class="muted">No sandbox matches.</p>}
      {p && (
        <nav class="pager" aria-label="Pages">
          <button
            type="button"
            disabled={offset === 0}
            onClick={() => go(filter, Math.max(0, offset - PAGE))}
          >
            ← Newer
          </button>
          <span data-testid="page-range">
            {p.total === 0 ? '0' : `${offset + 1}–${Math.min(p.total, offset + p.items.length)}`} of {p.total}
          </span>
          <button type="button" disabled={offset + PAGE >= p.total} onClick={() => go(filter, offset + PAGE)}>
            Older →
          </button>
        </nav>
      )}
    </section>
  );
}

/** The filters, applied on submit (a state at once); what is typed stays a draft until then. */
function FilterForm({
  draft,
  setDraft,
  go,
}: {
  draft: SandboxFilter;
  setDraft: (f: SandboxFilter) => void;
  go: (f: SandboxFilter, offset: number) => void;
}) {
  return (
    <form
      class="filters"
      aria-label="Filter sandboxes"
      onSubmit={(e) => {
        e.preventDefault();
        go(draft, 0);
      }}
    >
      <select
        aria-label="state"
        value={draft.state}
        onChange={(e) => {
          const f = { ...draft, state: (e.target as HTMLSelectElement).value };
          setDraft(f);
          go(f, 0);
        }}
      >
        <option value="">any state</option>
        {SANDBOX_STATES.map((s) => (
          <option value={s} key={s}>
            {s}
          </option>
        ))}
      </select>
      <input
        aria-label="template"
        placeholder="template"
        value={draft.template}
        onInput={(e) => setDraft({ ...draft, template: (e.target as HTMLInputElement).value })}
      />
      <input
        aria-label="metadata filter"
        placeholder="metadata k=v&k2=v2"
        value={draft.metadata}
        onInput={(e) => setDraft({ ...draft, metadata: (e.target as HTMLInputElement).value })}
      />
      <input
        aria-label="search id"
        placeholder="id or template contains"
        value={draft.q}
        onInput={(e) => setDraft({ ...draft, q: (e.target as HTMLInputElement).value })}
      />
      <button type="submit">Filter</button>
    </form>
  );
}

/** One sandbox of the page, with its quick actions. */
function SandboxRow({ s, now, onDone }: { s: DashboardSandbox; now: number; onDone: () => void }) {
  return (
    <tr data-sandbox={s.sandboxID} data-state={s.state}>
      <td>
        <a href={href('sandboxes', s.sandboxID)} class="mono">
          {s.sandboxID}
        </a>
      </td>
      <td>
        <span class={`badge state-${s.state}`}>{s.state}</span>
      </td>
      <td>{s.alias ?? s.templateID}</td>
      <td class="wide">{s.nodeID}</td>
      <td class="wide meta">
        {Object.entries(s.metadata)
          .map(([k, v]) => `${k}=${v}`)
          .join(' ')}
      </td>
      <td>{age(s.startedAt, now)}</td>
      <td>{timeLeft(s.endAt, s.state, now)}</td>
      <td class="num">{pct(s.cpuUsedPct)}</td>
      <td class="num">
        {s.memUsedMiB !== undefined ? `${mib(s.memUsedMiB)} / ` : ''}
        {mib(s.memoryMB)}
      </td>
      <td class="wide">
        <SandboxActions sandboxID={s.sandboxID} state={s.state} onDone={onDone} />
      </td>
    </tr>
  );
}
