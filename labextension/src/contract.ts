/**
 * The front-end contract: the synced state and the custom messages of both widgets.
 *
 * The Python classes in `jupyter_superfluid/notebook/widgets/` hold the same trait
 * names; a Python test reads this file to check that they agree. The browser only
 * renders this state and sends intents: all HTTP happens in the kernel.
 */

/** The module both widgets register under (the Python `_model_module`). */
export const MODULE_NAME = 'jupyter-superfluid';

/** Equals the npm package version and the Python package's `__version__`. */
export const MODULE_VERSION = '0.1.0';

/** Where one output item is: streaming, or done. */
export type ItemStatus = 'in_progress' | 'completed' | 'incomplete';

/** A reasoning item: the model's thinking text. */
export interface ReasoningItem {
  type: 'reasoning';
  id: string;
  text: string;
  status: ItemStatus;
}

/** A message item: the answer text (Markdown). */
export interface MessageItem {
  type: 'message';
  id: string;
  text: string;
  status: ItemStatus;
}

/** A function call, with the output the magic's tool loop gave it (or null). */
export interface FunctionCallItem {
  type: 'function_call';
  id: string;
  call_id: string;
  name: string;
  namespace: string | null;
  arguments: string;
  output: string | null;
  status: ItemStatus;
}

/** Any output item the response view shows. */
export type OutputItem = ReasoningItem | MessageItem | FunctionCallItem;

/** Where a response is. `cancelled`: stopped, nothing stored. */
export type ResponseStatus =
  | 'idle'
  | 'in_progress'
  | 'completed'
  | 'incomplete'
  | 'failed'
  | 'cancelled';

/** Token counts of a response, and its speed. */
export interface Usage {
  input_tokens: number;
  cached_tokens: number;
  output_tokens: number;
  reasoning_tokens: number;
  /** Output tokens per second of streaming; null when unknown. */
  tokens_per_second: number | null;
}

/**
 * How the Stop button stops: `message` sends `{type: "stop"}` (the kernel is free and
 * closes the stream); `interrupt` also interrupts the kernel (a cell is streaming in
 * the foreground, so messages wait); `none` when nothing is running.
 */
export type StopMode = 'message' | 'interrupt' | 'none';

/** The synced state of `ResponseView`. */
export interface ResponseViewState {
  response_id: string;
  model: string;
  status: ResponseStatus;
  items: OutputItem[];
  usage: Usage | null;
  error: string;
  stop_mode: StopMode;
  /** The cell's model while it downloads or loads (before the response starts); else null. */
  waiting: ModelRow | null;
}

/** Where a served model is (the server's lifecycle states). */
export type ModelLifecycleState =
  | 'not_downloaded'
  | 'downloading'
  | 'available'
  | 'loading'
  | 'loaded'
  | 'failed'
  | 'unloaded';

/** How far a model's download got. */
export interface ModelProgress {
  done_bytes: number;
  total_bytes: number | null;
  bytes_per_second: number | null;
  /** done / total (0..1), when the total is known. */
  fraction: number | null;
  /** The file being fetched now. */
  file: string;
}

/** One served model, as the server's models API reports it. */
export interface ModelRow {
  id: string;
  state: ModelLifecycleState;
  spec: string;
  kind: string;
  origin: 'config' | 'added';
  progress: ModelProgress | null;
  error: string | null;
  since: number;
}

/** An action the models view sends for one model. */
export type ModelAction = 'load' | 'unload' | 'remove' | 'default';

/** The synced state of `ModelsView`. */
export interface ModelsViewState {
  models: ModelRow[];
  /** The model `%%respond` uses when a cell names none ('' when the server's first). */
  default_model: string;
  /** The models shown; all when empty. */
  only: string[];
  /** Model id -> the action sent for it and not answered yet. */
  pending: Record<string, string>;
  error: string;
  /** Whether the kernel follows the server's model events. */
  live: boolean;
}

/** Messages from the models view to the kernel. */
export type ModelsIntent = { type: ModelAction; id: string } | { type: 'refresh' };

/** Messages from the response view to the kernel. */
export type ResponseIntent = { type: 'stop' };

/** One stored response, as the listing endpoint gives it. */
export interface TreeNode {
  id: string;
  created_at: number;
  model: string;
  status: string;
  previous_response_id: string | null;
  cached_tokens: number;
  preview: string;
}

/** One input item of a response, reduced to what people read. */
export interface DetailInput {
  type: string;
  role: string;
  text: string;
}

/** What the tree shows of the selected node. */
export interface NodeDetail {
  id: string;
  model: string;
  status: string;
  input: DetailInput[];
  output: OutputItem[];
  usage: Usage | null;
}

/** The synced state of `ConversationTree` (`live` is a ResponseView model or null). */
export interface ConversationTreeState {
  nodes: TreeNode[];
  current: string;
  selected: string;
  detail: NodeDetail | null;
  busy: boolean;
  error: string;
}

/** Messages from the tree view to the kernel. */
export type TreeIntent =
  | { type: 'select'; id: string }
  | { type: 'branch'; id: string; text: string }
  | { type: 'delete'; id: string }
  | { type: 'refresh' };
