import type { CatalogEntry } from '../../shared/types.js';
import { api } from '../api.js';
import { useLoad } from '../components/useLoad.js';
import { bytes, time } from '../format.js';
import { live } from '../live.js';
import { href } from '../router.js';
import { useStore } from '../store.js';
import { buildTree, type TreeNode } from '../tree.js';

/** Snapshots as their incremental chains, and templates with their builds and sizes. */
export function Catalog() {
  const changes = useStore(live.changes);
  const catalog = useLoad(() => api.catalog(), [changes]);
  const templates = useLoad(() => api.templates(), [changes]);
  const entries = catalog.value?.entries ?? [];
  const snapshots = entries.filter((e) => e.kind === 'snapshot');
  const sizeOfBuild = new Map(
    entries.filter((e) => e.kind === 'template').map((e) => [e.buildID, e.bytesTotal]),
  );
  const tree = buildTree(snapshots);
  return (
    <section class="view catalog">
      <h1>Snapshots and templates</h1>
      <h2>Snapshots</h2>
      {catalog.error && (
        <p class="error" role="alert">
          {catalog.error}
        </p>
      )}
      {catalog.value && snapshots.length === 0 && <p class="muted">No snapshots yet.</p>}
      {tree.length > 0 && (
        <ul class="tree" aria-label="Snapshot chains">
          {tree.map((n) => (
            <Branch node={n} key={n.entry.id} depth={0} />
          ))}
        </ul>
      )}
      <h2>Templates</h2>
      {templates.error && (
        <p class="error" role="alert">
          {templates.error}
        </p>
      )}
      <div class="table-wrap">
        <table class="list" aria-label="Templates">
          <thead>
            <tr>
              <th>Template</th>
              <th>Names</th>
              <th>Latest build</th>
              <th class="num">Size</th>
              <th class="wide">Resources</th>
              <th class="wide">Updated</th>
            </tr>
          </thead>
          <tbody>
            <tr>
              <td class="mono">base</td>
              <td>base</td>
              <td>
                <span class="badge state-running">built in</span>
              </td>
              <td class="num">–</td>
              <td class="wide">node defaults</td>
              <td class="wide">–</td>
            </tr>
            {templates.value?.map((t) => (
              <tr key={t.templateID}>
                <td>
                  <a class="mono" href={href('templates', t.templateID)}>
                    {t.templateID}
                  </a>
                </td>
                <td>{t.names.join(', ')}</td>
                <td>
                  <span class={`badge build-${t.buildStatus}`}>{t.buildStatus}</span>
                </td>
                <td class="num">{bytes(sizeOfBuild.get(t.buildID))}</td>
                <td class="wide">
                  {t.cpuCount} vCPU · {t.memoryMB} MiB
                </td>
                <td class="wide">{time(t.updatedAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

function Branch({ node, depth }: { node: TreeNode; depth: number }) {
  const e: CatalogEntry = node.entry;
  return (
    <li data-snapshot={e.id}>
      <div class="tree-row">
        <span class="mono">{e.id}</span>
        {e.names.length > 0 && <span class="badge">{e.names.join(', ')}</span>}
        <span class="muted">
          {bytes(e.bytesTotal)} · {time(e.createdAt)}
          {e.sandboxID && depth === 0 ? ` · from sandbox ${e.sandboxID}` : ''}
        </span>
      </div>
      {node.children.length > 0 && (
        <ul>
          {node.children.map((c) => (
            <Branch node={c} key={c.entry.id} depth={depth + 1} />
          ))}
        </ul>
      )}
    </li>
  );
}
