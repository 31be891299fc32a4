/**
 * `POST /v1/completions` from the browser, streamed: through Jupyter's own
 * `ServerConnection` (its token and XSRF cookie), cancellable with an AbortSignal.
 * Aborting closes the connection, and the server stops generating at its next token.
 */

import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { CompletionError, parseChunk, readEvents } from './sse';

/** The body the completer sends (always streamed). */
export interface CompletionBody {
  model: string;
  prompt: string;
  suffix?: string;
  max_tokens: number;
  temperature: number;
  stop?: string[];
}

async function failure(response: Response): Promise<CompletionError> {
  const payload = (await response.json().catch(() => null)) as {
    error?: { message?: string; code?: string | null; param?: string | null };
  } | null;
  const error = payload?.error;
  const message = error?.message ?? `HTTP ${response.status}`;
  return new CompletionError(message, error?.code ?? null, error?.param ?? null);
}

/** The completion's text deltas as they arrive; throws `CompletionError` on an API error. */
export async function* streamCompletion(
  body: CompletionBody,
  signal: AbortSignal,
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): AsyncGenerator<string> {
  const url = URLExt.join(settings.baseUrl, 'v1', 'completions');
  const init = { method: 'POST', body: JSON.stringify({ ...body, stream: true }), signal };
  const response = await ServerConnection.makeRequest(url, init, settings);
  if (!response.ok || !response.body) {
    throw await failure(response);
  }
  for await (const { data } of readEvents(response.body)) {
    const chunk = parseChunk(data);
    if (chunk === null) {
      return;
    }
    yield chunk.text;
  }
}

/** The id of the first model the server lists (the default completion model). */
export async function firstServedModel(
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<string> {
  const url = URLExt.join(settings.baseUrl, 'v1', 'models');
  const response = await ServerConnection.makeRequest(url, {}, settings);
  if (!response.ok) {
    throw await failure(response);
  }
  const listing = (await response.json()) as { data?: { id: string }[] };
  const first = listing.data?.[0]?.id;
  if (!first) {
    throw new CompletionError('the server serves no model', 'model_not_found');
  }
  return first;
}
