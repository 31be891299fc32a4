/**
 * ModelsView: the served models, one row each — id, state, a live progress bar while a
 * model downloads or loads, the reason when it failed — with Load / Unload (or Stop) /
 * Use / Remove. The kernel follows the server's model events and syncs the rows; this
 * view renders them and sends intents (`ModelsIntent`). Remove asks twice.
 */

import { DOMWidgetModel, DOMWidgetView } from '@jupyter-widgets/base';
import type { ObjectHash } from 'backbone';

import {
  MODULE_NAME,
  MODULE_VERSION,
  type ModelAction,
  type ModelRow,
  type ModelsIntent
} from './contract';
import { el } from './items';
import { pausedText, progressBar, rowActions, stateLabel, visibleRows } from './progress';
import { RenderScheduler } from './schedule';

/** The model of a models view: the synced state of `ModelsViewState`. */
export class ModelsViewModel extends DOMWidgetModel {
  defaults(): ObjectHash {
    return {
      ...super.defaults(),
      _model_name: 'ModelsViewModel',
      _model_module: MODULE_NAME,
      _model_module_version: MODULE_VERSION,
      _view_name: 'ModelsViewView',
      _view_module: MODULE_NAME,
      _view_module_version: MODULE_VERSION,
      models: [],
      default_model: '',
      only: [],
      pending: {},
      error: '',
      live: false
    };
  }
}

/** A progress bar element (ARIA progressbar); `fraction` null draws it indeterminate. */
export function fillBar(bar: HTMLElement, fraction: number | null, text: string): void {
  bar.setAttribute('role', 'progressbar');
  bar.setAttribute('aria-valuemin', '0');
  bar.setAttribute('aria-valuemax', '100');
  bar.setAttribute('aria-valuetext', text);
  const fill = (bar.firstElementChild as HTMLElement | null) ?? bar.appendChild(el('div', 'sf-bar-fill'));
  if (fraction === null) {
    bar.removeAttribute('aria-valuenow');
    bar.classList.add('sf-bar-indeterminate');
    fill.style.width = '';
  } else {
    const percent = Math.floor(fraction * 100);
    bar.setAttribute('aria-valuenow', String(percent));
    bar.classList.remove('sf-bar-indeterminate');
    fill.style.width = `${percent}%`;
  }
}

/** Put ``children`` in ``parent``, touching the DOM only when the set or order changed. */
function replaceIfChanged(parent: HTMLElement, children: HTMLElement[]): void {
  const now = Array.from(parent.children);
  if (now.length === children.length && now.every((node, i) => node === children[i])) {
    return;
  }
  parent.replaceChildren(...children);
}

/** The view of the served models. */
export class ModelsViewView extends DOMWidgetView {
  private scheduler = new RenderScheduler(() => this.draw());
  private list!: HTMLElement;
  private errorEl!: HTMLElement;
  private liveEl!: HTMLElement;
  private armedRemove = '';

  render(): void {
    this.el.classList.add('sf-models');
    this.el.dataset.lmSuppressShortcuts = 'true';
    const header = el('div', 'sf-models-header');
    header.append(el('span', 'sf-models-title', 'Models'));
    this.liveEl = el('span', 'sf-models-live');
    const refresh = el('button', 'sf-button sf-models-refresh', 'Refresh');
    refresh.type = 'button';
    refresh.title = 'Read every model’s state again';
    refresh.addEventListener('click', () => this.intent({ type: 'refresh' }));
    header.append(this.liveEl, refresh);
    this.list = el('div', 'sf-models-list');
    this.list.setAttribute('role', 'list');
    this.errorEl = el('div', 'sf-error');
    this.errorEl.setAttribute('role', 'alert');
    this.el.append(header, this.list, this.errorEl);
    this.listenTo(this.model, 'change', () => this.scheduler.request());
    this.draw();
  }

  /** Draw the rows (at most once per frame); rows are reused by model id. */
  private draw(): void {
    const rows = visibleRows(this.model.get('models') as ModelRow[], this.model.get('only') as string[]);
    const pending = this.model.get('pending') as Record<string, string>;
    const current = new Map<string, HTMLElement>();
    for (const child of Array.from(this.list.children) as HTMLElement[]) {
      current.set(child.dataset.id ?? '', child);
    }
    const drawn: HTMLElement[] = rows.map(row => {
      const node = current.get(row.id) ?? this.newRow(row.id);
      this.fillRow(node, row, pending[row.id] ?? '');
      return node;
    });
    replaceIfChanged(this.list, drawn);
    this.liveEl.textContent = this.model.get('live') ? '● live' : '';
    this.liveEl.title = this.model.get('live') ? 'Following the server’s model events' : '';
    this.errorEl.textContent = this.model.get('error') as string;
    this.el.dataset.renders = String(this.scheduler.count);
  }

  private newRow(id: string): HTMLElement {
    const node = el('div', 'sf-model');
    node.dataset.id = id;
    node.setAttribute('role', 'listitem');
    const head = el('div', 'sf-model-head');
    head.append(el('span', 'sf-model-id', id), el('span', 'sf-model-state'), el('span', 'sf-model-is-default'));
    head.append(el('span', 'sf-model-actions'));
    const bar = el('div', 'sf-bar');
    node.append(head, bar, el('div', 'sf-model-detail'));
    return node;
  }

  private fillRow(node: HTMLElement, row: ModelRow, pending: string): void {
    const isDefault = row.id === (this.model.get('default_model') as string);
    node.dataset.state = row.state;
    node.title = row.spec;
    const state = node.querySelector('.sf-model-state') as HTMLElement;
    state.textContent = stateLabel(row.state);
    state.dataset.state = row.state;
    const mark = node.querySelector('.sf-model-is-default') as HTMLElement;
    mark.textContent = isDefault ? 'default' : '';
    mark.hidden = !isDefault;
    const bar = node.querySelector('.sf-bar') as HTMLElement;
    const detail = node.querySelector('.sf-model-detail') as HTMLElement;
    const shown = progressBar(row);
    bar.hidden = shown === null;
    if (shown !== null) {
      fillBar(bar, shown.fraction, shown.text);
    }
    detail.textContent = row.state === 'failed' ? row.error ?? '' : shown?.text ?? pausedText(row);
    detail.classList.toggle('sf-model-error', row.state === 'failed');
    this.fillActions(node.querySelector('.sf-model-actions') as HTMLElement, row, isDefault, pending);
  }

  private fillActions(box: HTMLElement, row: ModelRow, isDefault: boolean, pending: string): void {
    const existing = new Map<string, HTMLButtonElement>();
    for (const child of Array.from(box.children) as HTMLButtonElement[]) {
      existing.set(child.dataset.action ?? '', child);
    }
    const buttons = rowActions(row, isDefault).map(a => {
      let button = existing.get(a.action);
      if (button === undefined) {
        // Buttons are kept across redraws, so a click is never lost to a progress update.
        button = el('button', `sf-button sf-model-${a.action}`);
        button.type = 'button';
        button.dataset.action = a.action;
        const action = a.action;
        button.addEventListener('click', () => this.act(action, row.id));
      }
      button.textContent = a.label;
      button.title = a.title;
      button.disabled = pending !== '';
      if (a.action === 'remove') {
        const armed = this.armedRemove === row.id;
        button.classList.add('sf-button-warn');
        button.classList.toggle('sf-armed', armed);
        button.textContent = armed ? 'Confirm remove' : a.label;
      }
      return button;
    });
    replaceIfChanged(box, buttons);
    box.dataset.pending = pending;
  }

  /** One click: remove asks twice, the rest go to the kernel at once. */
  private act(action: ModelAction, id: string): void {
    if (action === 'remove' && this.armedRemove !== id) {
      this.armedRemove = id;
      this.scheduler.request();
      return;
    }
    this.armedRemove = '';
    this.intent({ type: action, id });
    this.scheduler.request();
  }

  private intent(message: ModelsIntent): void {
    this.send(message);
  }
}
