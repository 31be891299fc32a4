/**
 * The inline completion provider: ghost text from the local model in every code cell.
 *
 * JupyterLab's inline completer calls `fetch` as the user types (after its debounce),
 * then `stream` for the item it got, showing the text as it grows; Tab accepts,
 * Alt+] / Alt+[ cycle and Escape dismisses, as for any provider. A new `fetch`
 * aborts the request it supersedes, so the server stops that generation. Failures
 * never reach the editor: they go to the status-bar note.
 */

import type {
  CompletionHandler,
  IInlineCompletionContext,
  IInlineCompletionItem,
  IInlineCompletionList,
  IInlineCompletionProvider
} from '@jupyterlab/completer';
import type { ISettingRegistry } from '@jupyterlab/settingregistry';
import type { Widget } from '@lumino/widgets';

import { CompletionBody, firstServedModel, streamCompletion } from './client';
import { buildPrompt, CellText, CompletionPrompt, DEFAULT_LIMITS, fitLines } from './prompt';
import { CompletionError } from './sse';
import type { CompletionStatus } from './status';

/** The provider's own settings (beside JupyterLab's `enabled`, `debouncerDelay`, `timeout`). */
export interface CompleterSettings {
  model: string;
  maxTokens: number;
  multiline: boolean;
  temperature: number;
}

export const DEFAULT_SETTINGS: CompleterSettings = {
  model: '',
  maxTokens: 32,
  multiline: false,
  temperature: 0.2
};

/** What the settings editor shows under "Inline completion providers". */
export const SETTINGS_SCHEMA: ISettingRegistry.IProperty = {
  default: { ...DEFAULT_SETTINGS, debouncerDelay: 250, timeout: 20000 },
  properties: {
    model: {
      title: 'Completion model',
      description: 'The served model that completes code (empty: the first served model).',
      type: 'string'
    },
    maxTokens: {
      title: 'Maximum tokens',
      description: 'The longest completion, in tokens.',
      type: 'number',
      minimum: 1,
      maximum: 4096
    },
    multiline: {
      title: 'Multi-line completions',
      description: 'Complete several lines at once (otherwise up to the end of the line).',
      type: 'boolean'
    },
    temperature: {
      title: 'Temperature',
      description: 'Sampling temperature of completions.',
      type: 'number',
      minimum: 0,
      maximum: 2
    }
  }
};

interface Pending {
  prompt: CompletionPrompt;
  controller: AbortController;
}

interface NotebookLike {
  content: { widgets: readonly { model: CellModelLike }[]; activeCellIndex: number };
}

interface CellModelLike {
  type: string;
  sharedModel: { getSource(): string };
}

/** The cells above the active one, when the widget is a notebook. */
export function cellsBefore(widget: Widget): CellText[] {
  const content = (widget as unknown as Partial<NotebookLike>).content;
  if (!content || !Array.isArray(content.widgets)) {
    return [];
  }
  return content.widgets.slice(0, Math.max(0, content.activeCellIndex)).map(cell => ({
    kind: cell.model.type === 'code' ? 'code' : cell.model.type === 'markdown' ? 'markdown' : 'raw',
    source: cell.model.sharedModel.getSource()
  }));
}

function isAbort(err: unknown): boolean {
  return err instanceof DOMException && err.name === 'AbortError';
}

/** Ghost-text completions from this server's `/v1/completions`. */
export class SuperfluidInlineProvider implements IInlineCompletionProvider {
  readonly name = 'Superfluid (local model)';
  readonly identifier = 'jupyter-superfluid';
  readonly schema = SETTINGS_SCHEMA;
  private settings: CompleterSettings = { ...DEFAULT_SETTINGS };
  private pending = new Map<string, Pending>();
  private current: AbortController | null = null;
  private counter = 0;
  private model: Promise<string> | null = null;
  private withoutFim = new Set<string>(); // models that answered `suffix` with a 400

  constructor(private readonly status: CompletionStatus) {}

  /** JupyterLab passes the provider's settings here whenever they change. */
  configure(settings: { [property: string]: unknown }): void {
    this.settings = { ...DEFAULT_SETTINGS, ...(settings as Partial<CompleterSettings>) };
    this.model = null;
  }

  /** Start a completion for the cursor (superseding the pending one) and stream it. */
  async fetch(
    request: CompletionHandler.IRequest,
    context: IInlineCompletionContext
  ): Promise<IInlineCompletionList> {
    this.current?.abort(); // typing on: the superseded request stops on the server too
    const controller = new AbortController();
    this.current = controller;
    const prompt = buildPrompt(cellsBefore(context.widget), request.text, request.offset, DEFAULT_LIMITS);
    const token = `superfluid-${++this.counter}`;
    this.pending.set(token, { prompt, controller });
    return { items: [{ insertText: '', isIncomplete: true, token }] };
  }

  /** The completion's text as it grows; nothing at all when it fails. */
  async *stream(token: string): AsyncGenerator<{ response: IInlineCompletionItem }> {
    const pending = this.pending.get(token);
    if (!pending) {
      return;
    }
    const { prompt, controller } = pending;
    let text = '';
    try {
      for await (const delta of this.deltas(prompt, controller.signal)) {
        text += delta;
        yield { response: { insertText: fitLines(text, this.settings.multiline), token, isIncomplete: true } };
      }
      yield { response: { insertText: fitLines(text, this.settings.multiline), token, isIncomplete: false } };
      this.status.ok();
    } catch (err) {
      if (!isAbort(err)) {
        // Nothing in the editor: the suggestion ends empty, the status bar says why.
        yield { response: { insertText: '', token, isIncomplete: false } };
        this.status.failed(err instanceof Error ? err.message : String(err));
        if (err instanceof CompletionError && err.code === 'model_not_found') {
          this.model = null;
        }
      }
    } finally {
      controller.abort(); // the completer stopped listening: nothing more is generated
      this.pending.delete(token);
    }
  }

  /** The deltas; a model without fill-in-the-middle tokens completes without the suffix. */
  private async *deltas(prompt: CompletionPrompt, signal: AbortSignal): AsyncGenerator<string> {
    const body = await this.body(prompt);
    try {
      yield* streamCompletion(body, signal);
    } catch (err) {
      if (!(err instanceof CompletionError && err.param === 'suffix' && 'suffix' in body)) {
        throw err;
      }
      this.withoutFim.add(body.model);
      yield* streamCompletion(await this.body(prompt), signal);
    }
  }

  private async body(prompt: CompletionPrompt): Promise<CompletionBody> {
    if (this.settings.model) {
      this.model = Promise.resolve(this.settings.model);
    }
    this.model ??= firstServedModel();
    const body = {
      model: await this.model,
      prompt: prompt.prompt,
      max_tokens: this.settings.maxTokens,
      temperature: this.settings.temperature,
      ...(this.settings.multiline ? {} : { stop: ['\n'] })
    };
    const fim = prompt.suffix.length > 0 && !this.withoutFim.has(body.model);
    return fim ? { ...body, suffix: prompt.suffix } : body;
  }
}
