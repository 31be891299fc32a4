/**
 * ResponseView: one response as it streams — reasoning, Markdown text, function calls,
 * status, usage — with a Stop button.
 *
 * The kernel batches updates (one sync per ~50 ms at most) and this view draws at
 * most once per animation frame, redrawing only the items that changed.
 */

import { DOMWidgetModel, DOMWidgetView } from '@jupyter-widgets/base';
import type { ObjectHash } from 'backbone';

import {
  MODULE_NAME,
  MODULE_VERSION,
  type ModelRow,
  type OutputItem,
  type ResponseIntent,
  type StopMode,
  type Usage
} from './contract';
import { shortId, statusLabel } from './format';
import { el, fillUsage, ItemList } from './items';
import { fillBar } from './modelsView';
import { progressBar, stateLabel } from './progress';
import { RenderScheduler } from './schedule';

/** The model of a response view: the synced state of `ResponseViewState`. */
export class ResponseViewModel extends DOMWidgetModel {
  defaults(): ObjectHash {
    return {
      ...super.defaults(),
      _model_name: 'ResponseViewModel',
      _model_module: MODULE_NAME,
      _model_module_version: MODULE_VERSION,
      _view_name: 'ResponseViewView',
      _view_module: MODULE_NAME,
      _view_module_version: MODULE_VERSION,
      response_id: '',
      model: '',
      status: 'idle',
      items: [],
      usage: null,
      error: '',
      stop_mode: 'none',
      waiting: null
    };
  }
}

/** A kernel that can be interrupted, as the JupyterLab widget managers expose it. */
interface Interruptible {
  interrupt(): Promise<void>;
}

/** The kernel behind a widget manager, when it has one. */
function kernelOf(manager: unknown): Interruptible | null {
  const kernel = (manager as { kernel?: Interruptible | null } | null)?.kernel;
  return kernel && typeof kernel.interrupt === 'function' ? kernel : null;
}

/** The view of a response. */
export class ResponseViewView extends DOMWidgetView {
  private scheduler = new RenderScheduler(() => this.draw());
  private items!: ItemList;
  private statusEl!: HTMLElement;
  private metaEl!: HTMLElement;
  private stopButton!: HTMLButtonElement;
  private errorEl!: HTMLElement;
  private usageEl!: HTMLElement;
  private waitingEl!: HTMLElement;
  private stopping = false;

  render(): void {
    this.el.classList.add('sf-response');
    this.el.dataset.lmSuppressShortcuts = 'true'; // keys here are ours, not notebook shortcuts
    const header = el('div', 'sf-response-header');
    this.statusEl = el('span', 'sf-status');
    this.statusEl.setAttribute('role', 'status');
    this.metaEl = el('span', 'sf-response-meta');
    this.stopButton = el('button', 'sf-button sf-stop', 'Stop');
    this.stopButton.type = 'button';
    this.stopButton.title = 'Stop the generation (nothing is stored)';
    this.stopButton.addEventListener('click', () => this.stop());
    header.append(this.statusEl, this.metaEl, this.stopButton);
    this.waitingEl = el('div', 'sf-waiting');
    this.waitingEl.append(el('span', 'sf-waiting-text'), el('div', 'sf-bar'));
    const body = el('div', 'sf-items');
    this.items = new ItemList(body);
    this.errorEl = el('div', 'sf-error');
    this.errorEl.setAttribute('role', 'alert');
    this.usageEl = el('div', 'sf-usage');
    this.el.append(header, this.waitingEl, body, this.errorEl, this.usageEl);
    this.listenTo(this.model, 'change', () => this.scheduler.request());
    this.draw();
  }

  /** Draw the current state (called at most once per frame). */
  private draw(): void {
    const status = this.model.get('status') as string;
    const stopMode = this.model.get('stop_mode') as StopMode;
    const responseId = this.model.get('response_id') as string;
    this.el.dataset.status = status;
    this.el.setAttribute('aria-busy', String(status === 'in_progress'));
    this.statusEl.textContent = statusLabel(status);
    this.statusEl.dataset.status = status;
    const meta = [this.model.get('model') as string, responseId ? shortId(responseId) : ''];
    this.metaEl.textContent = meta.filter(Boolean).join(' · ');
    this.metaEl.title = responseId;
    if (status !== 'in_progress') {
      this.stopping = false;
    }
    const running = status === 'in_progress' && stopMode !== 'none';
    this.stopButton.hidden = !running;
    this.stopButton.disabled = this.stopping;
    this.stopButton.textContent = this.stopping ? 'Stopping…' : 'Stop';
    this.drawWaiting(this.model.get('waiting') as ModelRow | null);
    this.items.update(this.model.get('items') as OutputItem[]);
    this.errorEl.textContent = this.model.get('error') as string;
    fillUsage(this.usageEl, this.model.get('usage') as Usage | null);
    this.el.dataset.renders = String(this.scheduler.count);
  }

  /** The cell's model downloading or loading, before the response starts. */
  private drawWaiting(waiting: ModelRow | null): void {
    const shown = waiting ? progressBar(waiting) : null;
    this.waitingEl.hidden = waiting === null;
    this.el.dataset.waiting = waiting?.state ?? '';
    if (waiting === null) {
      return;
    }
    const text = this.waitingEl.querySelector('.sf-waiting-text') as HTMLElement;
    text.textContent = `${waiting.id}: ${stateLabel(waiting.state)}${shown ? ` · ${shown.text}` : ''}`;
    const bar = this.waitingEl.querySelector('.sf-bar') as HTMLElement;
    bar.hidden = shown === null;
    if (shown !== null) {
      fillBar(bar, shown.fraction, shown.text);
    }
  }

  /** Ask the kernel to stop; interrupt it when a cell is streaming in the foreground. */
  private stop(): void {
    if (this.stopping) {
      return;
    }
    this.stopping = true;
    const intent: ResponseIntent = { type: 'stop' };
    this.send(intent);
    if (this.model.get('stop_mode') === 'interrupt') {
      const kernel = kernelOf(this.model.widget_manager);
      kernel?.interrupt().catch((reason: unknown) => {
        this.errorEl.textContent = `Could not interrupt the kernel: ${String(reason)}`;
      });
    }
    this.scheduler.request();
  }
}
