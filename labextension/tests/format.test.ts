import { readFileSync } from 'node:fs';

import { describe, expect, it } from 'vitest';

import { MODULE_NAME, MODULE_VERSION } from '../src/contract';
import { oneLine, prettyJson, shortId, statusLabel, usageParts } from '../src/format';
import { RenderScheduler } from '../src/schedule';

describe('format', () => {
  it('lists usage figures, reasoning and speed only when known', () => {
    const base = { input_tokens: 1200, cached_tokens: 0, output_tokens: 30, reasoning_tokens: 0, tokens_per_second: null };
    expect(usageParts(base).map(p => `${p.value} ${p.label}`)).toEqual(['1,200 input', '0 cached', '30 output']);
    const warm = { ...base, cached_tokens: 1100, reasoning_tokens: 12, tokens_per_second: 231.4 };
    expect(usageParts(warm).map(p => `${p.value} ${p.label}`)).toEqual([
      '1,200 input',
      '1,100 cached (warm)',
      '30 output',
      '12 reasoning',
      '231 tok/s'
    ]);
  });

  it('pretty-prints JSON arguments and leaves other text alone', () => {
    expect(prettyJson('{"city":"Oslo"}')).toBe('{\n  "city": "Oslo"\n}');
    expect(prettyJson('{"city": "Os')).toBe('{"city": "Os');
  });

  it('names statuses and shortens ids and previews', () => {
    expect(statusLabel('cancelled')).toBe('stopped');
    expect(statusLabel('weird')).toBe('weird');
    expect(shortId('resp_0123456789abcdef0123456789abcdef')).toBe('012345…cdef');
    expect(oneLine('a\n b   c', 80)).toBe('a b c');
    expect(oneLine('x'.repeat(100), 10)).toBe('xxxxxxxxx…');
  });

  it('declares the module as the package does', () => {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
    expect(MODULE_NAME).toBe(pkg.name);
    expect(MODULE_VERSION).toBe(pkg.version);
  });
});

describe('render batching', () => {
  it('draws once for any number of requests before the frame', () => {
    const queue: (() => void)[] = [];
    let drawn = 0;
    const scheduler = new RenderScheduler(() => (drawn += 1), cb => queue.push(cb));
    expect([scheduler.request(), scheduler.request(), scheduler.request()]).toEqual([true, false, false]);
    expect(drawn).toBe(0);
    queue.splice(0).forEach(cb => cb());
    expect(drawn).toBe(1);
    expect(scheduler.request()).toBe(true);
    scheduler.flush();
    queue.splice(0).forEach(cb => cb()); // the deferred call finds nothing pending
    expect([drawn, scheduler.count]).toEqual([2, 2]);
  });
});
