/**
 * Reading server-sent events, for the completer (`/v1/completions`: each `data:` line a
 * JSON chunk, `data: [DONE]` the end) and the chat panel (`/v1/responses`). The parsing
 * is pure, so it is tested without a server.
 */

/** What one streamed chunk carries that the completer uses. */
export interface CompletionChunk {
  text: string;
  finishReason: string | null;
}

/** The error an API answered, with its code (`model_loading`, `context_length_exceeded`…). */
export class CompletionError extends Error {
  constructor(
    message: string,
    readonly code: string | null,
    readonly param: string | null = null
  ) {
    super(message);
  }
}

/** Splits a growing buffer into complete events; the unfinished rest stays in `rest`. */
export function splitEvents(buffer: string): { events: string[]; rest: string } {
  const normalized = buffer.replace(/\r\n/g, '\n');
  const parts = normalized.split('\n\n');
  const rest = parts.pop() ?? '';
  return { events: parts.filter(part => part.trim().length > 0), rest };
}

/** The data of one event (its `data:` lines joined), or null when it has none. */
export function eventData(event: string): string | null {
  const lines = event
    .split('\n')
    .filter(line => line.startsWith('data:'))
    .map(line => line.slice(5).replace(/^ /, ''));
  return lines.length > 0 ? lines.join('\n') : null;
}

/** One event's chunk; null at `[DONE]`; throws `CompletionError` for an error event. */
export function parseChunk(data: string): CompletionChunk | null {
  if (data.trim() === '[DONE]') {
    return null;
  }
  const payload = JSON.parse(data) as {
    choices?: { text?: string; finish_reason?: string | null }[];
    error?: { message?: string; code?: string | null; param?: string | null };
  };
  if (payload.error) {
    const { message, code, param } = payload.error;
    throw new CompletionError(message ?? 'completion failed', code ?? null, param ?? null);
  }
  const choice = payload.choices?.[0];
  return { text: choice?.text ?? '', finishReason: choice?.finish_reason ?? null };
}

/** Server-sent events of a body: each event's name and data. */
export async function* readEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<{ event: string; data: string }> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        return;
      }
      buffer += decoder.decode(value, { stream: true });
      const { events, rest } = splitEvents(buffer);
      buffer = rest;
      for (const event of events) {
        const data = eventData(event);
        if (data !== null) {
          const name = /^event: ?(.*)$/m.exec(event)?.[1] ?? 'message';
          yield { event: name, data };
        }
      }
    }
  } finally {
    reader.releaseLock();
  }
}
