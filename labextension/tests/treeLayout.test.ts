import { describe, expect, it } from 'vitest';

import type { TreeNode } from '../src/contract';
import { buildForest, layoutRows, neighbour, pathTo } from '../src/treeLayout';

function node(id: string, parent: string | null, at: number, cached = 0): TreeNode {
  return { id, previous_response_id: parent, created_at: at, cached_tokens: cached, model: 'm', status: 'completed', preview: `p ${id}` };
}

// a ─ b ─ c
//   └ d ─ e
//         └ f      (newest first, as the listing gives them)
const LISTING = [node('f', 'd', 6, 9), node('e', 'd', 5, 9), node('d', 'a', 4, 3), node('c', 'b', 3, 5), node('b', 'a', 2, 3), node('a', null, 1)];

describe('tree layout', () => {
  it('orders rows depth first, oldest branch first, with guides', () => {
    const rows = layoutRows(LISTING, 'e');
    expect(rows.map(r => r.id)).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
    expect(rows.map(r => r.guides)).toEqual(['', '├─ ', '│  └─ ', '└─ ', '   ├─ ', '   └─ ']);
    expect(rows.map(r => r.depth)).toEqual([0, 1, 2, 1, 2, 2]);
  });

  it('marks siblings, leaves, warm forks, the current node and its path', () => {
    const rows = layoutRows(LISTING, 'e');
    const by = Object.fromEntries(rows.map(r => [r.id, r]));
    expect(by.b.siblings).toBe(2);
    expect(by.e.siblings).toBe(2);
    expect(rows.filter(r => r.isLeaf).map(r => r.id)).toEqual(['c', 'e', 'f']);
    expect(by.a.warm).toBe(false);
    expect(by.d.warm).toBe(true);
    expect(rows.filter(r => r.isCurrent).map(r => r.id)).toEqual(['e']);
    expect(rows.filter(r => r.onPath).map(r => r.id)).toEqual(['a', 'd', 'e']);
  });

  it('keeps the children of a hidden (deleted) parent under a placeholder', () => {
    const withoutD = LISTING.filter(n => n.id !== 'd');
    const rows = layoutRows(withoutD, 'f');
    expect(rows.map(r => [r.id, r.node === null, r.depth])).toEqual([
      ['a', false, 0],
      ['b', false, 1],
      ['c', false, 2],
      ['d', true, 0],
      ['e', false, 1],
      ['f', false, 1]
    ]);
    expect(pathTo(buildForest(withoutD), 'f')).toEqual(['d', 'f']);
  });

  it('handles several conversations, an unknown current id and empty input', () => {
    const rows = layoutRows([node('x', null, 10), ...LISTING], 'nope');
    expect(rows.filter(r => r.depth === 0).map(r => r.id)).toEqual(['a', 'x']);
    expect(rows.some(r => r.isCurrent || r.onPath)).toBe(false);
    expect(layoutRows([])).toEqual([]);
  });

  it('moves between rows for arrow keys, clamped at the ends', () => {
    const rows = layoutRows(LISTING);
    expect(neighbour(rows, 'a', -1)).toBe('a');
    expect(neighbour(rows, 'a', 1)).toBe('b');
    expect(neighbour(rows, 'f', 1)).toBe('f');
    expect(neighbour(rows, 'zz', 1)).toBe('a');
  });
});
