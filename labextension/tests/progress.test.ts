// The models view's pure parts: labels, sizes, bars, and which actions each state offers.
import { describe, expect, it } from 'vitest';

import type { ModelRow } from '../src/contract';
import {
  formatBytes,
  formatDuration,
  pausedText,
  progressBar,
  rowActions,
  stateLabel,
  visibleRows
} from '../src/progress';

function row(state: ModelRow['state'], extra: Partial<ModelRow> = {}): ModelRow {
  return {
    id: 'm',
    state,
    spec: 'hf:o/r/m.gguf',
    kind: 'hf',
    origin: 'added',
    progress: null,
    error: null,
    since: 0,
    ...extra
  };
}

const half = {
  done_bytes: 200_000_000,
  total_bytes: 400_000_000,
  bytes_per_second: 10_000_000,
  fraction: 0.5,
  file: 'm.gguf'
};

describe('progress', () => {
  it('writes sizes in decimal units and durations in words', () => {
    expect(formatBytes(999)).toBe('999 B');
    expect(formatBytes(1500)).toBe('1.5 KB');
    expect(formatBytes(396_705_472)).toBe('396.7 MB');
    expect(formatDuration(20)).toBe('20 s');
    expect(formatDuration(600)).toBe('10 min');
    expect(formatDuration(4000)).toBe('67 min');
    expect(formatDuration(6000)).toBe('1 h 40 min');
  });

  it('draws a bar for a download with its figures, and an indeterminate one for a load', () => {
    expect(progressBar(row('downloading', { progress: half }))).toEqual({
      fraction: 0.5,
      text: '50% · 200.0 MB of 400.0 MB · 10.0 MB/s · 20 s left'
    });
    const unsized = { ...half, total_bytes: null, fraction: null, bytes_per_second: null };
    expect(progressBar(row('downloading', { progress: unsized }))).toEqual({
      fraction: null,
      text: '200.0 MB'
    });
    expect(progressBar(row('downloading'))).toEqual({ fraction: null, text: 'starting…' });
    expect(progressBar(row('loading'))).toEqual({ fraction: null, text: 'loading…' });
    for (const state of ['available', 'loaded', 'failed', 'unloaded', 'not_downloaded'] as const) {
      expect(progressBar(row(state))).toBeNull();
    }
  });

  it('says where a stopped download stopped', () => {
    expect(pausedText(row('not_downloaded', { progress: { ...half, fraction: 0.42 } }))).toBe('stopped at 42%');
    expect(pausedText(row('not_downloaded'))).toBe('');
    expect(pausedText(row('available', { progress: half }))).toBe('');
  });

  it('offers the actions that fit each state', () => {
    const labels = (r: ModelRow, isDefault = false) => rowActions(r, isDefault).map(a => a.label);
    expect(labels(row('downloading'))).toEqual(['Stop', 'Use', 'Remove']);
    expect(labels(row('loading'))).toEqual(['Use', 'Remove']);
    expect(labels(row('loaded'), true)).toEqual(['Unload', 'Remove']);
    expect(labels(row('available'))).toEqual(['Load', 'Use', 'Remove']);
    expect(labels(row('not_downloaded'))).toEqual(['Download & load', 'Use', 'Remove']);
    expect(labels(row('failed'))).toEqual(['Retry', 'Use', 'Remove']);
    expect(rowActions(row('downloading'), false)[0].action).toBe('unload');
    expect(rowActions(row('failed'), true)[0].action).toBe('load');
  });

  it('names states and keeps the rows a view is limited to, in its order', () => {
    expect(stateLabel('not_downloaded')).toBe('not downloaded');
    expect(stateLabel('available')).toBe('on disk');
    const rows = [row('loaded', { id: 'a' }), row('available', { id: 'b' }), row('failed', { id: 'c' })];
    expect(visibleRows(rows, []).map(r => r.id)).toEqual(['a', 'b', 'c']);
    expect(visibleRows(rows, ['c', 'a', 'gone']).map(r => r.id)).toEqual(['c', 'a']);
  });
});
