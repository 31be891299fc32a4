import { describe, expect, it } from 'vitest';

import { buildPrompt, earlierCells, fitLines, markdownAsComment } from '../src/completions/prompt';
import { eventData, parseChunk, splitEvents, CompletionError } from '../src/completions/sse';

const limits = { contextChars: 8000, markdownLines: 3 };

describe('the completion prompt', () => {
  it('puts earlier cells first, then the cell up to the cursor; the rest is the suffix', () => {
    const before = [
      { kind: 'code' as const, source: 'import numpy as np\n' },
      { kind: 'markdown' as const, source: '# Data\n\nLoad it.' },
      { kind: 'raw' as const, source: 'ignored' },
      { kind: 'code' as const, source: '   ' }
    ];
    const { prompt, suffix } = buildPrompt(before, 'x = np.ar\nprint(x)', 9, limits);
    expect(prompt).toBe('import numpy as np\n\n# Data\n# Load it.\n\nx = np.ar');
    expect(suffix).toBe('\nprint(x)');
  });

  it('keeps the prefix stable while the user types on in the cell', () => {
    const before = [{ kind: 'code' as const, source: 'a = 1' }];
    const first = buildPrompt(before, 'b = a', 5, limits).prompt;
    const next = buildPrompt(before, 'b = a +', 7, limits).prompt;
    expect(next.startsWith(first)).toBe(true);
  });

  it('drops whole cells from the start when they do not fit, never characters', () => {
    const cells = ['first = 1', 'second = 2', 'third = 3'].map(source => ({ kind: 'code' as const, source }));
    const kept = earlierCells(cells, { contextChars: 24, markdownLines: 3 });
    expect(kept).toBe('second = 2\n\nthird = 3\n\n');
  });

  it('clamps the cursor and keeps markdown brief', () => {
    expect(buildPrompt([], 'abc', 99, limits)).toEqual({ prompt: 'abc', suffix: '' });
    expect(markdownAsComment('1\n2\n3\n4', 2)).toBe('# 1\n# 2');
  });

  it('cuts a completion to one line unless multi-line', () => {
    expect(fitLines('a()\nb()', false)).toBe('a()');
    expect(fitLines('a()\nb()', true)).toBe('a()\nb()');
  });
});

describe('the completion stream', () => {
  it('splits events and keeps the unfinished rest', () => {
    const { events, rest } = splitEvents('data: {"a":1}\n\ndata: [DONE]\n\ndata: {"b"');
    expect(events).toEqual(['data: {"a":1}', 'data: [DONE]']);
    expect(rest).toBe('data: {"b"');
  });

  it('reads chunks, the end and errors', () => {
    const chunk = parseChunk(eventData('data: {"choices":[{"text":"x","finish_reason":null}]}') ?? '');
    expect(chunk).toEqual({ text: 'x', finishReason: null });
    expect(parseChunk('[DONE]')).toBeNull();
    const error = () => parseChunk('{"error":{"message":"no","code":"unsupported_parameter","param":"suffix"}}');
    expect(error).toThrow(CompletionError);
    try {
      error();
    } catch (err) {
      expect((err as CompletionError).param).toBe('suffix');
    }
  });
});
