/**
 * Pure formatting helpers shared by both views: usage, status, JSON, ids, previews.
 */

import type { ResponseStatus, Usage } from './contract';

/** One labelled figure of the usage line. */
export interface UsagePart {
  key: string;
  label: string;
  value: string;
  title: string;
}

/** A whole number with thousands separators. */
export function formatCount(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** The usage figures to show, in reading order (reasoning and speed only when known). */
export function usageParts(usage: Usage): UsagePart[] {
  const parts: UsagePart[] = [
    {
      key: 'input',
      label: 'input',
      value: formatCount(usage.input_tokens),
      title: 'Prompt tokens'
    },
    {
      key: 'cached',
      label: usage.cached_tokens > 0 ? 'cached (warm)' : 'cached',
      value: formatCount(usage.cached_tokens),
      title: 'Prompt tokens served from the KV cache, not evaluated again'
    },
    {
      key: 'output',
      label: 'output',
      value: formatCount(usage.output_tokens),
      title: 'Generated tokens'
    }
  ];
  if (usage.reasoning_tokens > 0) {
    parts.push({
      key: 'reasoning',
      label: 'reasoning',
      value: formatCount(usage.reasoning_tokens),
      title: 'Generated tokens spent reasoning'
    });
  }
  if (usage.tokens_per_second !== null && usage.tokens_per_second > 0) {
    parts.push({
      key: 'speed',
      label: 'tok/s',
      value: usage.tokens_per_second.toFixed(usage.tokens_per_second < 10 ? 1 : 0),
      title: 'Output tokens per second while streaming'
    });
  }
  return parts;
}

const STATUS_LABELS: Record<ResponseStatus, string> = {
  idle: 'waiting',
  in_progress: 'generating…',
  completed: 'completed',
  incomplete: 'incomplete',
  failed: 'failed',
  cancelled: 'stopped'
};

/** A status in words. */
export function statusLabel(status: string): string {
  return STATUS_LABELS[status as ResponseStatus] ?? status;
}

/** Function-call arguments pretty-printed when they are JSON, else as they are. */
export function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** A response id shortened for display (`resp_1234…abcd`). */
export function shortId(id: string): string {
  const hex = id.replace(/^resp_/, '');
  return hex.length > 12 ? `${hex.slice(0, 6)}…${hex.slice(-4)}` : hex;
}

/** A preview flattened to one line and cut to `limit` characters. */
export function oneLine(text: string, limit = 80): string {
  const flat = text.split(/\s+/).filter(Boolean).join(' ');
  return flat.length <= limit ? flat : `${flat.slice(0, limit - 1)}…`;
}
