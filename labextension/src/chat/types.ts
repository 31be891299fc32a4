/**
 * The wire shapes the chat panel reads from this server's HTTP API (conversations,
 * their items and response tree, served models), and the panel's settings.
 */

/** A content part of a message item. */
export interface ContentPart {
  type: string; // input_text, output_text, summary_text, reasoning_text, refusal, …
  text?: string;
  refusal?: string;
}

/** One item of a conversation (the Responses API's input and output items). */
export interface ConversationItem {
  type: string; // message, function_call, function_call_output, reasoning
  id?: string;
  role?: string;
  content?: ContentPart[] | string;
  summary?: ContentPart[];
  name?: string;
  arguments?: string;
  call_id?: string;
  output?: string | ContentPart[];
  status?: string;
}

/** A conversation object (with this server's extension fields). */
export interface Conversation {
  id: string;
  object: 'conversation';
  created_at: number;
  updated_at?: number;
  metadata: Record<string, string> | null;
  title?: string | null;
  head_response_id?: string | null;
}

/** A list answer of the API. */
export interface ListPage<T> {
  object: 'list';
  data: T[];
  first_id?: string | null;
  last_id?: string | null;
  has_more?: boolean;
}

/** One response of a conversation's tree (`GET v1/conversations/{id}/responses`). */
export interface ResponseNode {
  id: string;
  previous_response_id: string | null;
  created_at: number;
  preview?: string;
  status?: string;
  model?: string;
}

/** A model download's progress, as the models API gives it. */
export interface ModelProgressInfo {
  done_bytes: number;
  total_bytes: number | null;
  bytes_per_second: number | null;
  fraction: number | null;
  file?: string;
  text?: string;
}

/** A served model and its lifecycle state, merged from `/v1/models` and the events. */
export interface ServedModel {
  id: string;
  state: string; // not_downloaded, downloading, available, loading, loaded, failed, unloaded
  progress: ModelProgressInfo | null;
  error: string | null;
  contextSize: number | null;
}

/** The panel's settings (`schema/chat.json`). */
export interface ChatSettings {
  defaultModel: string;
  instructions: string;
  temperature: number | null;
  maxOutputTokens: number | null;
  autoApproveTools: boolean;
  offerKernelTools: boolean;
  toolChoice: ToolChoice;
  reasoningEffort: ReasoningEffort | null;
}

/** The Responses API's `reasoning.effort` ("none" turns a model's thinking off). */
export type ReasoningEffort = 'none' | 'minimal' | 'low' | 'medium' | 'high';

const EFFORTS: readonly ReasoningEffort[] = ['none', 'minimal', 'low', 'medium', 'high'];

/** The first answer of a turn: may call a tool, must call one, or must not. */
export type ToolChoice = 'auto' | 'required' | 'none';

const TOOL_CHOICES: readonly ToolChoice[] = ['auto', 'required', 'none'];

export const DEFAULT_SETTINGS: ChatSettings = {
  defaultModel: '',
  instructions: '',
  temperature: null,
  maxOutputTokens: null,
  autoApproveTools: false,
  offerKernelTools: false,
  toolChoice: 'auto',
  reasoningEffort: null
};

/** Settings from the registry's composite, each field checked (unknown → default). */
export function readSettings(composite: Record<string, unknown>): ChatSettings {
  const num = (v: unknown): number | null => (typeof v === 'number' && isFinite(v) ? v : null);
  return {
    defaultModel: typeof composite.defaultModel === 'string' ? composite.defaultModel : '',
    instructions: typeof composite.instructions === 'string' ? composite.instructions : '',
    temperature: num(composite.temperature),
    maxOutputTokens: num(composite.maxOutputTokens),
    autoApproveTools: composite.autoApproveTools === true,
    offerKernelTools: composite.offerKernelTools === true,
    toolChoice: TOOL_CHOICES.find(c => c === composite.toolChoice) ?? 'auto',
    reasoningEffort: EFFORTS.find(e => e === composite.reasoningEffort) ?? null
  };
}
