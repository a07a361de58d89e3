import { api } from '../api.js';
import { Sparkline } from '../components/Sparkline.js';
import { useLoad } from '../components/useLoad.js';
import { bytes, mib, pct } from '../format.js';
import { live } from '../live.js';
import { useStore } from '../store.js';

/** Every node: health, CPU and memory (nominal, measured, free), sandboxes, cache, sparklines. */
export function Nodes() {
  const nodes = useStore(live.nodes);
  const catalog = useLoad(() => api.catalog(), []);
  const caches = new Map((catalog.value?.caches ?? []).map((c) => [c.nodeID, c]));
  const list = [...nodes.values()].sort((a, b) => a.view.nodeID.localeCompare(b.view.nodeID));
  return (
    <section class="view nodes">
      <h1>Nodes</h1>
      {list.length === 0 && <p class="muted">No node has reported yet.</p>}
      <div class="node-grid">
        {list.map(({ view: n, history }) => {
          const cache = caches.get(n.nodeID);
          const cpuPct = n.cpuCount ? (100 * n.cpuLoad1m) / n.cpuCount : undefined;
          return (
            <article class="node" data-node={n.nodeID} key={n.nodeID} aria-label={`node ${n.nodeID}`}>
              <header>
                <h2>{n.nodeID}</h2>
                <span class={`badge status-${n.status}`}>{n.status}</span>
                {n.draining && <span class="badge status-draining">draining</span>}
              </header>
              <dl>
                <dt>CPU</dt>
                <dd>
                  {n.cpuCount} cores · load {n.cpuLoad1m.toFixed(2)} ({pct(cpuPct)}) · {n.allocatedCPU}{' '}
                  allocated
                </dd>
                <dt>Memory</dt>
                <dd>
                  nominal {mib(n.allocatedMemoryMiB)} · measured {mib(n.memoryUsedMiB)} · free{' '}
                  {mib(n.memoryFreeMiB)} of {mib(n.memoryTotalMiB)}
                </dd>
                <dt>Sandboxes</dt>
                <dd>
                  <span data-field="running">{n.running}</span> running ·{' '}
                  <span data-field="paused">{n.paused}</span> paused ·{' '}
                  <span data-field="starting">{n.starting}</span> starting
                </dd>
                <dt>Cache</dt>
                <dd>
                  {cache
                    ? `${bytes(cache.usedBytes)} of ${bytes(cache.capacityBytes)} (${cache.entries} captures)`
                    : n.cacheEntries !== undefined
                      ? `${n.cacheEntries} captures`
                      : '–'}
                </dd>
                <dt>Version</dt>
                <dd>{n.version || '–'}</dd>
              </dl>
              <div class="sparks">
                <div>
                  <span class="muted">CPU load</span>
                  <Sparkline values={history.map((h) => h[1])} label={`CPU load of ${n.nodeID}`} />
                </div>
                <div>
                  <span class="muted">memory used</span>
                  <Sparkline values={history.map((h) => h[2])} label={`memory used on ${n.nodeID}`} />
                </div>
              </div>
            </article>
          );
        })}
      </div>
    </section>
  );
}
