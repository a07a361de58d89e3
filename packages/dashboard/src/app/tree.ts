import type { CatalogEntry } from '../shared/types.js';

export interface TreeNode {
  entry: CatalogEntry;
  children: TreeNode[];
}

/**
 * Captures as chains: each entry under the parent it was stored as a delta of, roots (no
 * parent, or a parent no longer listed) oldest first, children oldest first.
 */
export function buildTree(entries: readonly CatalogEntry[]): TreeNode[] {
  const nodes = new Map(entries.map((e) => [e.id, { entry: e, children: [] as TreeNode[] }]));
  const roots: TreeNode[] = [];
  for (const n of nodes.values()) {
    const parent = n.entry.parent ? nodes.get(n.entry.parent) : undefined;
    // A cycle cannot come from the repository, but a bad record must not hang the page.
    if (parent && parent !== n) parent.children.push(n);
    else roots.push(n);
  }
  const byAge = (a: TreeNode, b: TreeNode) => a.entry.createdAt.localeCompare(b.entry.createdAt);
  const sort = (list: TreeNode[], seen: Set<TreeNode>) => {
    list.sort(byAge);
    for (const n of list) {
      if (seen.has(n)) continue;
      seen.add(n);
      sort(n.children, seen);
    }
  };
  sort(roots, new Set());
  return roots;
}
