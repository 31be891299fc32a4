/**
 * The notebook side of context: the active cell, the selected cells or the whole
 * notebook read from JupyterLab's notebook tracker (sources, text outputs, errors
 * with tracebacks), and the context provider that turns a message's notebook
 * attachments into input items cut to fit the model's window.
 */

import type { INotebookAttachment } from '@jupyter/chat';
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import type { ChatApi } from './api';
import { assembleContext, contextBudget, type CellContext, type OutputText } from './context';
import type { ContextProvider, ContextResult } from './model';
import type { ModelsStore } from './models';
import { userMessage } from './transcript';
import type { ChatSettings, ConversationItem } from './types';

/** What to attach. */
export type Scope = 'active' | 'selected' | 'notebook';

type Json = Record<string, unknown>;

function joined(value: unknown): string {
  return Array.isArray(value) ? value.join('') : typeof value === 'string' ? value : '';
}

/** nbformat outputs as text (rich outputs by their text/plain, images left out). */
export function outputsText(outputs: Json[]): OutputText[] {
  const texts: OutputText[] = [];
  for (const out of outputs) {
    const type = out.output_type;
    if (type === 'stream') {
      texts.push({ kind: 'stream', text: joined(out.text) });
    } else if (type === 'execute_result' || type === 'display_data') {
      const data = (out.data ?? {}) as Json;
      const text = joined(data['text/plain']);
      if (text) {
        texts.push({ kind: 'result', text });
      }
    } else if (type === 'error') {
      const traceback = Array.isArray(out.traceback) ? (out.traceback as string[]).join('\n') : '';
      texts.push({ kind: 'error', text: traceback, ename: String(out.ename ?? ''), evalue: String(out.evalue ?? '') });
    }
  }
  return texts;
}

/** Every cell of a notebook, as context. */
export function notebookCells(panel: NotebookPanel): CellContext[] {
  const cells = panel.content.model?.cells;
  const result: CellContext[] = [];
  if (!cells) {
    return result;
  }
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    const json = cell.toJSON() as unknown as Json;
    const kind = (cell.type === 'code' || cell.type === 'markdown' ? cell.type : 'raw') as CellContext['kind'];
    result.push({
      id: cell.id,
      index: i,
      kind,
      source: cell.sharedModel.getSource(),
      executionCount: typeof json.execution_count === 'number' ? json.execution_count : null,
      outputs: kind === 'code' ? outputsText((json.outputs as Json[]) ?? []) : []
    });
  }
  return result;
}

/** Whether a cell has an error output. */
export function hasError(cell: CellContext | undefined): boolean {
  return !!cell?.outputs.some(o => o.kind === 'error');
}

/** The attachment of the current notebook's cells in `scope` (null: no notebook). */
export function attachmentFor(tracker: INotebookTracker, scope: Scope): INotebookAttachment | null {
  const panel = tracker.currentWidget;
  if (!panel) {
    return null;
  }
  const notebook = panel.content;
  const path = panel.context.path;
  if (scope === 'notebook') {
    return { type: 'notebook', value: path };
  }
  const widgets = notebook.widgets.filter(
    (cell, i) => (scope === 'active' ? i === notebook.activeCellIndex : notebook.isSelectedOrActive(cell))
  );
  return {
    type: 'notebook',
    value: path,
    cells: widgets.map(cell => ({ id: cell.model.id, input_type: cell.model.type as 'code' | 'markdown' | 'raw' }))
  };
}

/** The open notebook at `path`. */
function panelAt(tracker: INotebookTracker, path: string): NotebookPanel | null {
  return tracker.find(p => p.context.path === path) ?? null;
}

/** The context provider over the open notebooks, cutting to the model's window. */
export function notebookContext(
  tracker: INotebookTracker,
  api: ChatApi,
  models: ModelsStore,
  settings: () => ChatSettings
): ContextProvider {
  return async (attachments, question, model, conversation): Promise<ContextResult> => {
    const maxOut = settings().maxOutputTokens ?? 1024;
    const window = async (input: ConversationItem[]) => {
      try {
        const body = conversation ? { model, input, conversation } : { model, input };
        const answer = await api.inputTokens(body);
        return { used: answer.input_tokens, window: answer.context_window };
      } catch {
        return { used: 0, window: models.get(model)?.contextSize ?? 8192 };
      }
    };
    const base = await window([question]);
    let budget = contextBudget(base.window, maxOut, base.used);
    const result: ContextResult = { items: [], markers: [] };
    for (const attachment of attachments) {
      const panel = panelAt(tracker, attachment.value);
      if (!panel) {
        continue;
      }
      const all = notebookCells(panel);
      const wanted = attachment.cells?.map(c => c.id);
      const cells = wanted ? all.filter(c => wanted.includes(c.id)) : all;
      const focus = wanted?.[0] ?? all[panel.content.activeCellIndex]?.id ?? null;
      const language = (panel.content.model?.defaultKernelLanguage || 'python').toString();
      let assembled = assembleContext(attachment.value, cells, budget, focus, language);
      const measured = await window([userMessage(assembled.text), question]);
      const room = measured.window - maxOut;
      if (measured.used > room && measured.used > 0) {
        const scale = Math.max(0.1, (room - base.used) / (measured.used - base.used));
        assembled = assembleContext(attachment.value, cells, Math.floor(assembled.text.length * scale * 0.9), focus, language);
      }
      budget = Math.max(0, budget - assembled.text.length);
      result.items.push(userMessage(assembled.text));
      result.markers.push(assembled.marker);
    }
    return result;
  };
}
