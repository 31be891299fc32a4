/**
 * This server's HTTP API as the chat panel uses it: conversations (list, create,
 * rename, switch branch, delete), their items and response tree, streamed responses,
 * input token counts, served models and loading one. Every request goes through
 * Jupyter's `ServerConnection`, so its token and XSRF cookie apply.
 */

import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { readEvents } from '../completions/sse';
import type { StreamEvent } from './events';
import type { Conversation, ConversationItem, ListPage, ResponseNode } from './types';

/** An error the API answered (`{"error": {message, type, param, code}}`). */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string | null = null
  ) {
    super(message);
  }
}

/** The body of `POST v1/responses` the panel sends. */
export interface ResponseBody {
  model: string;
  input: ConversationItem[];
  conversation: string;
  previous_response_id?: string;
  branch_from_root?: boolean;
  instructions?: string;
  temperature?: number;
  max_output_tokens?: number;
  tools?: unknown[];
  tool_choice?: 'required' | 'none';
  reasoning?: { effort: string };
}

/** The raw model object of `/v1/models` (its `superfluid` field holds the state). */
export interface ModelObject {
  id: string;
  superfluid?: {
    state?: string;
    progress?: unknown;
    error?: string | null;
    context_size?: number;
    loaded?: boolean;
  };
}

/** The client, over one server's settings. */
export class ChatApi {
  constructor(readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings()) {}

  private url(...parts: string[]): string {
    return URLExt.join(this.settings.baseUrl, ...parts.map(encodeURIComponent).map(p => p.replace(/%2F/g, '/')));
  }

  private async request<T>(path: string[], init: RequestInit = {}, query = ''): Promise<T> {
    const response = await ServerConnection.makeRequest(this.url(...path) + query, init, this.settings);
    if (!response.ok) {
      throw await failure(response);
    }
    return (await response.json()) as T;
  }

  private post<T>(path: string[], body: unknown): Promise<T> {
    return this.request<T>(path, { method: 'POST', body: JSON.stringify(body) });
  }

  /** The user's chats, most recently active first; `q` searches titles. */
  listConversations(q = '', limit = 50): Promise<ListPage<Conversation>> {
    const query = URLExt.objectToQueryString(q ? { limit, q } : { limit });
    return this.request(['v1', 'conversations'], {}, query);
  }

  createConversation(metadata: Record<string, string> = {}): Promise<Conversation> {
    return this.post(['v1', 'conversations'], { metadata });
  }

  getConversation(id: string): Promise<Conversation> {
    return this.request(['v1', 'conversations', id]);
  }

  /** Replace its metadata (rename: `metadata.title`). */
  updateConversation(id: string, metadata: Record<string, string>): Promise<Conversation> {
    return this.post(['v1', 'conversations', id], { metadata });
  }

  /** Move it to the branch that ends at `responseId`. */
  switchBranch(id: string, responseId: string): Promise<Conversation> {
    return this.post(['v1', 'conversations', id], { head_response_id: responseId });
  }

  deleteConversation(id: string): Promise<{ id: string; deleted: boolean }> {
    return this.request(['v1', 'conversations', id], { method: 'DELETE' });
  }

  /** Every item of the current branch, oldest first (all pages). */
  async items(id: string): Promise<ConversationItem[]> {
    const all: ConversationItem[] = [];
    let after: string | null = null;
    for (let page = 0; page < 100; page++) {
      const q: Record<string, string | number> = { order: 'asc', limit: 100 };
      if (after) {
        q.after = after;
      }
      const listing: ListPage<ConversationItem> = await this.request(
        ['v1', 'conversations', id, 'items'],
        {},
        URLExt.objectToQueryString(q)
      );
      all.push(...listing.data);
      after = listing.last_id ?? null;
      if (!listing.has_more || !after) {
        break;
      }
    }
    return all;
  }

  /** Every response of the conversation, on every branch, oldest first. */
  async responses(id: string): Promise<ResponseNode[]> {
    const listing = await this.request<ListPage<ResponseNode>>(['v1', 'conversations', id, 'responses']);
    return listing.data;
  }

  /** How many tokens `body` would send, and the model's window. */
  inputTokens(body: Partial<ResponseBody>): Promise<{ input_tokens: number; context_window: number }> {
    return this.post(['v1', 'responses', 'input_tokens'], body);
  }

  async models(): Promise<ModelObject[]> {
    const listing = await this.request<ListPage<ModelObject>>(['v1', 'models']);
    return listing.data;
  }

  /** Start loading a model (downloading it first if needed). */
  loadModel(id: string): Promise<unknown> {
    return this.request(['superfluid', 'v1', 'models', id, 'load'], { method: 'POST' });
  }

  /** A streamed response's events as they arrive; aborting the signal stops the server. */
  async *streamResponse(body: ResponseBody, signal: AbortSignal): AsyncGenerator<StreamEvent> {
    const init = { method: 'POST', body: JSON.stringify({ ...body, stream: true }), signal };
    const response = await ServerConnection.makeRequest(this.url('v1', 'responses'), init, this.settings);
    if (!response.ok || !response.body) {
      throw await failure(response);
    }
    for await (const { data } of readEvents(response.body)) {
      if (data.trim() === '[DONE]') {
        return;
      }
      yield JSON.parse(data) as StreamEvent;
    }
  }

  /** The models API's event stream (snapshot, then changes). */
  async *modelEvents(signal: AbortSignal): AsyncGenerator<{ event: string; data: string }> {
    const init = { signal, headers: { Accept: 'text/event-stream' } };
    const url = this.url('superfluid', 'v1', 'models', 'events');
    const response = await ServerConnection.makeRequest(url, init, this.settings);
    if (!response.ok || !response.body) {
      throw await failure(response);
    }
    yield* readEvents(response.body);
  }
}

/** The API error of a failed answer. */
export async function failure(response: Response): Promise<ApiError> {
  const payload = (await response.json().catch(() => null)) as {
    error?: { message?: string; code?: string | null };
  } | null;
  const error = payload?.error;
  return new ApiError(error?.message ?? `HTTP ${response.status}`, response.status, error?.code ?? null);
}

