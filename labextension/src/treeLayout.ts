/**
 * The conversation tree's layout, from the listing endpoint's flat records.
 *
 * Responses point at the one they continue (`previous_response_id`); several that
 * continue the same response are siblings (branches). A parent that the listing does
 * not show (deleted, but still continued: hidden) becomes a placeholder row, so its
 * children keep their place. Rows come out in depth-first order, oldest branch first,
 * each with the box-drawing guides that draw the tree in text.
 */

import type { TreeNode } from './contract';

/** One row of the drawn tree. */
export interface TreeRow {
  id: string;
  node: TreeNode | null; // null: a hidden (deleted but continued) response
  parentId: string | null;
  depth: number;
  guides: string;
  isLeaf: boolean;
  siblings: number;
  isCurrent: boolean;
  onPath: boolean; // on the way from the root to the current node
  warm: boolean;
}

/** The nodes indexed: by id, children by parent (oldest first), and roots. */
export interface Forest {
  byId: Map<string, TreeNode>;
  children: Map<string, string[]>;
  roots: string[];
  hidden: Set<string>;
}

function byAge(byId: Map<string, TreeNode>): (a: string, b: string) => number {
  const at = (id: string) => byId.get(id)?.created_at ?? 0;
  return (a, b) => at(a) - at(b) || (a < b ? -1 : a > b ? 1 : 0);
}

/** Index flat listing records into a forest (hidden parents become roots). */
export function buildForest(nodes: TreeNode[]): Forest {
  const byId = new Map(nodes.map(n => [n.id, n] as [string, TreeNode]));
  const children = new Map<string, string[]>();
  const roots: string[] = [];
  const hidden = new Set<string>();
  for (const node of nodes) {
    const parent = node.previous_response_id;
    if (!parent) {
      roots.push(node.id);
      continue;
    }
    if (!byId.has(parent) && !hidden.has(parent)) {
      hidden.add(parent);
      roots.push(parent);
    }
    const list = children.get(parent) ?? [];
    list.push(node.id);
    children.set(parent, list);
  }
  const order = byAge(byId);
  for (const list of children.values()) {
    list.sort(order);
  }
  const rootAge = (id: string) =>
    byId.get(id)?.created_at ?? Math.min(...(children.get(id) ?? []).map(c => byId.get(c)?.created_at ?? 0));
  roots.sort((a, b) => rootAge(a) - rootAge(b) || (a < b ? -1 : 1));
  return { byId, children, roots, hidden };
}

/** The ids from the root down to `id` (empty when `id` is unknown). */
export function pathTo(forest: Forest, id: string): string[] {
  const path: string[] = [];
  const seen = new Set<string>();
  let at: string | null = id;
  while (at && !seen.has(at) && (forest.byId.has(at) || forest.hidden.has(at))) {
    seen.add(at);
    path.unshift(at);
    at = forest.byId.get(at)?.previous_response_id ?? null;
  }
  return path;
}

/** Lay the nodes out as rows, depth first, marking the current node and its path. */
export function layoutRows(nodes: TreeNode[], current = ''): TreeRow[] {
  const forest = buildForest(nodes);
  const onPath = new Set(pathTo(forest, current));
  const rows: TreeRow[] = [];
  const seen = new Set<string>();
  const visit = (id: string, parentId: string | null, prefix: string, last: boolean, depth: number) => {
    if (seen.has(id)) {
      return;
    }
    seen.add(id);
    const node = forest.byId.get(id) ?? null;
    const kids = forest.children.get(id) ?? [];
    const connector = depth === 0 ? '' : last ? '└─ ' : '├─ ';
    rows.push({
      id,
      node,
      parentId,
      depth,
      guides: prefix + connector,
      isLeaf: kids.length === 0,
      siblings: parentId === null ? 1 : (forest.children.get(parentId) ?? []).length,
      isCurrent: id === current,
      onPath: onPath.has(id),
      warm: (node?.cached_tokens ?? 0) > 0
    });
    const childPrefix = depth === 0 ? '' : prefix + (last ? '   ' : '│  ');
    kids.forEach((kid, i) => visit(kid, id, childPrefix, i === kids.length - 1, depth + 1));
  };
  forest.roots.forEach(root => visit(root, null, '', true, 0));
  return rows;
}

/** The row after or before `id` in `rows`, for arrow-key navigation. */
export function neighbour(rows: TreeRow[], id: string, step: 1 | -1): string | null {
  const i = rows.findIndex(r => r.id === id);
  if (i < 0) {
    return rows.length ? rows[0].id : null;
  }
  const j = Math.min(rows.length - 1, Math.max(0, i + step));
  return rows[j].id;
}
