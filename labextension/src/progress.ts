/**
 * Pure helpers of the models view and the response view's waiting bar: state labels,
 * sizes, rates, what a progress bar shows, and which actions a model's row offers.
 */

import type { ModelAction, ModelLifecycleState, ModelRow } from './contract';

/** A state in words. */
export function stateLabel(state: ModelLifecycleState | string): string {
  const labels: Record<string, string> = {
    not_downloaded: 'not downloaded',
    downloading: 'downloading',
    available: 'on disk',
    loading: 'loading',
    loaded: 'loaded',
    failed: 'failed',
    unloaded: 'unloaded'
  };
  return labels[state] ?? state;
}

/** Bytes for people, in decimal units as the hub shows sizes: `1.2 MB`. */
export function formatBytes(n: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let value = n;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return unit === 0 ? `${Math.round(value)} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** What a model's bar shows. */
export interface Bar {
  /** 0..1 for a known fraction; null for an indeterminate bar (loading, unknown size). */
  fraction: number | null;
  /** The text beside the bar: `42% · 1.2 MB of 2.9 MB · 350.0 KB/s · 5 s left`. */
  text: string;
}

/** The bar of a model that is downloading or loading; null when it is neither. */
export function progressBar(row: ModelRow): Bar | null {
  if (row.state === 'loading') {
    return { fraction: null, text: 'loading…' };
  }
  if (row.state !== 'downloading') {
    return null;
  }
  const p = row.progress;
  if (!p) {
    return { fraction: null, text: 'starting…' };
  }
  const parts: string[] = [];
  if (p.fraction !== null) {
    parts.push(`${Math.floor(p.fraction * 100)}%`);
  }
  parts.push(p.total_bytes ? `${formatBytes(p.done_bytes)} of ${formatBytes(p.total_bytes)}` : formatBytes(p.done_bytes));
  if (p.bytes_per_second) {
    parts.push(`${formatBytes(p.bytes_per_second)}/s`);
    if (p.total_bytes) {
      const left = Math.max(0, (p.total_bytes - p.done_bytes) / p.bytes_per_second);
      parts.push(`${formatDuration(left)} left`);
    }
  }
  return { fraction: p.fraction, text: parts.join(' · ') };
}

/** Seconds for people: `45 s`, `3 min`, `1 h 5 min`. */
export function formatDuration(seconds: number): string {
  const s = Math.round(seconds);
  if (s < 90) {
    return `${s} s`;
  }
  const minutes = Math.round(s / 60);
  if (minutes < 90) {
    return `${minutes} min`;
  }
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** How far a stopped download got (`paused at 40%`), else ''. */
export function pausedText(row: ModelRow): string {
  const p = row.progress;
  if (row.state !== 'not_downloaded' || !p || !p.done_bytes) {
    return '';
  }
  return p.fraction !== null
    ? `stopped at ${Math.floor(p.fraction * 100)}%`
    : `stopped at ${formatBytes(p.done_bytes)}`;
}

/** One button of a model's row. */
export interface RowAction {
  action: ModelAction;
  label: string;
  title: string;
}

/** The actions a row offers: what makes sense in its state, and `pending` when one runs. */
export function rowActions(row: ModelRow, isDefault: boolean): RowAction[] {
  const actions: RowAction[] = [];
  const busy = row.state === 'downloading' || row.state === 'loading';
  if (row.state === 'downloading') {
    actions.push({ action: 'unload', label: 'Stop', title: 'Stop the download (it resumes later)' });
  } else if (row.state === 'loaded') {
    actions.push({ action: 'unload', label: 'Unload', title: 'Free its memory' });
  } else if (!busy) {
    const fetch = row.state === 'not_downloaded' || (row.state === 'failed' && row.kind === 'hf');
    actions.push({
      action: 'load',
      label: row.state === 'failed' ? 'Retry' : fetch ? 'Download & load' : 'Load',
      title: fetch ? 'Download it (resuming), then load it' : 'Load it into memory'
    });
  }
  if (!isDefault) {
    actions.push({ action: 'default', label: 'Use', title: 'Make it the model %%respond uses' });
  }
  actions.push({ action: 'remove', label: 'Remove', title: 'Stop serving it (click twice)' });
  return actions;
}

/** The rows to show: `only` when given (in that order), else all. */
export function visibleRows(rows: ModelRow[], only: string[]): ModelRow[] {
  if (only.length === 0) {
    return rows;
  }
  const byId = new Map(rows.map(r => [r.id, r]));
  return only.map(id => byId.get(id)).filter((r): r is ModelRow => r !== undefined);
}
