/**
 * ConversationTree: the stored responses of a conversation drawn as a tree, with the
 * selected node's input and output, a box to branch from it (or continue a leaf), and
 * delete. The kernel does all HTTP; this view renders state and sends intents
 * (`TreeIntent`). A branch streams into a ResponseView child (`live`).
 */

import { DOMWidgetModel, DOMWidgetView, unpack_models, type ISerializers } from '@jupyter-widgets/base';
import type { ObjectHash } from 'backbone';

import {
  MODULE_NAME,
  MODULE_VERSION,
  type NodeDetail,
  type TreeIntent,
  type TreeNode
} from './contract';
import { formatCount, oneLine, shortId, statusLabel } from './format';
import { el, fillUsage, ItemList } from './items';
import { renderMarkdown } from './markdown';
import { RenderScheduler } from './schedule';
import { layoutRows, neighbour, type TreeRow } from './treeLayout';

/** The model of a conversation tree (`ConversationTreeState` plus `live`). */
export class ConversationTreeModel extends DOMWidgetModel {
  static serializers: ISerializers = {
    ...DOMWidgetModel.serializers,
    live: { deserialize: unpack_models }
  };

  defaults(): ObjectHash {
    return {
      ...super.defaults(),
      _model_name: 'ConversationTreeModel',
      _model_module: MODULE_NAME,
      _model_module_version: MODULE_VERSION,
      _view_name: 'ConversationTreeView',
      _view_module: MODULE_NAME,
      _view_module_version: MODULE_VERSION,
      nodes: [],
      current: '',
      selected: '',
      detail: null,
      busy: false,
      error: '',
      live: null
    };
  }
}

/** One row's button. */
function rowButton(row: TreeRow, selected: string): HTMLButtonElement {
  const button = el('button', 'sf-node');
  button.type = 'button';
  button.dataset.id = row.id;
  button.setAttribute('role', 'treeitem');
  button.setAttribute('aria-level', String(row.depth + 1));
  button.setAttribute('aria-selected', String(row.id === selected));
  button.tabIndex = row.id === selected ? 0 : -1;
  button.classList.toggle('sf-node-current', row.isCurrent);
  button.classList.toggle('sf-node-path', row.onPath);
  button.classList.toggle('sf-node-hidden', row.node === null);
  button.classList.toggle('sf-node-warm', row.warm);
  if (row.isCurrent) {
    button.setAttribute('aria-current', 'true');
  }
  const node = row.node;
  button.title = node ? `${node.id}\n${node.model} · ${node.status}` : `${row.id} (deleted)`;
  button.append(el('span', 'sf-guides', row.guides), el('span', 'sf-dot'));
  button.append(el('span', 'sf-preview', node ? oneLine(node.preview) || '(no text)' : '(deleted)'));
  if (row.warm && node) {
    const warm = el('span', 'sf-badge sf-badge-warm', `⚡ ${formatCount(node.cached_tokens)}`);
    warm.title = `Warm fork: ${node.cached_tokens} prompt tokens served from the KV cache`;
    button.append(warm);
  }
  if (node && node.status !== 'completed') {
    button.append(el('span', 'sf-badge sf-badge-status', statusLabel(node.status)));
  }
  if (row.isCurrent) {
    button.append(el('span', 'sf-badge sf-badge-current', 'current'));
  }
  return button;
}

/** The view of a conversation tree. */
export class ConversationTreeView extends DOMWidgetView {
  private scheduler = new RenderScheduler(() => this.draw());
  private rows: TreeRow[] = [];
  private nodesEl!: HTMLElement;
  private countEl!: HTMLElement;
  private busyEl!: HTMLElement;
  private errorEl!: HTMLElement;
  private detailEl!: HTMLElement;
  private detailHead!: HTMLElement;
  private inputEl!: HTMLElement;
  private output!: ItemList;
  private usageEl!: HTMLElement;
  private form!: HTMLFormElement;
  private branchInput!: HTMLInputElement;
  private branchButton!: HTMLButtonElement;
  private branchLabel!: HTMLLabelElement;
  private deleteButton!: HTMLButtonElement;
  private liveEl!: HTMLElement;
  private liveView: DOMWidgetView | null = null;
  private armedDelete = '';
  private rowsSignature = '';

  render(): void {
    this.el.classList.add('sf-tree');
    this.el.dataset.lmSuppressShortcuts = 'true'; // arrows, Enter, typing: ours, not the notebook's
    this.el.append(this.toolbar());
    this.errorEl = el('div', 'sf-error');
    this.errorEl.setAttribute('role', 'alert');
    const body = el('div', 'sf-tree-body');
    this.nodesEl = el('div', 'sf-tree-nodes');
    this.nodesEl.setAttribute('role', 'tree');
    this.nodesEl.setAttribute('aria-label', 'Stored responses of this conversation');
    this.nodesEl.addEventListener('keydown', event => this.onKey(event));
    this.nodesEl.addEventListener('click', event => this.onRowClick(event));
    body.append(this.nodesEl, this.detailPane());
    this.liveEl = el('div', 'sf-tree-live');
    this.el.append(this.errorEl, body, this.liveEl);
    this.listenTo(this.model, 'change', () => this.scheduler.request());
    this.listenTo(this.model, 'change:live', () => void this.showLive());
    void this.showLive();
    this.draw();
  }

  private toolbar(): HTMLElement {
    const bar = el('div', 'sf-tree-toolbar');
    this.countEl = el('span', 'sf-tree-count');
    this.busyEl = el('span', 'sf-busy', 'working…');
    const refresh = el('button', 'sf-button sf-refresh', 'Refresh');
    refresh.type = 'button';
    refresh.addEventListener('click', () => this.intent({ type: 'refresh' }));
    bar.append(el('span', 'sf-tree-title', 'Conversation'), this.countEl, this.busyEl, refresh);
    return bar;
  }

  private detailPane(): HTMLElement {
    this.detailEl = el('div', 'sf-tree-detail');
    this.detailHead = el('div', 'sf-detail-head');
    this.inputEl = el('div', 'sf-detail-input');
    const outputEl = el('div', 'sf-detail-output');
    this.output = new ItemList(outputEl);
    this.usageEl = el('div', 'sf-usage');
    this.detailEl.append(this.detailHead, this.inputEl, outputEl, this.usageEl, this.branchForm());
    return this.detailEl;
  }

  private branchForm(): HTMLElement {
    this.form = el('form', 'sf-branch');
    const inputId = `sf-branch-${this.cid}`;
    this.branchLabel = el('label', 'sf-branch-label');
    this.branchLabel.htmlFor = inputId;
    this.branchInput = el('input', 'sf-input sf-branch-input');
    this.branchInput.id = inputId;
    this.branchInput.type = 'text';
    this.branchInput.placeholder = 'Your message';
    this.branchInput.autocomplete = 'off';
    this.branchButton = el('button', 'sf-button sf-button-accept sf-branch-submit', 'Branch');
    this.branchButton.type = 'submit';
    this.deleteButton = el('button', 'sf-button sf-button-warn sf-delete', 'Delete');
    this.deleteButton.type = 'button';
    this.deleteButton.addEventListener('click', () => this.onDelete());
    this.deleteButton.addEventListener('blur', () => this.disarm());
    this.form.addEventListener('submit', event => {
      event.preventDefault();
      this.onBranch();
    });
    // Keys typed here are ours, not the notebook's shortcuts; Enter sends.
    this.branchInput.addEventListener('keydown', event => {
      event.stopPropagation();
      if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.onBranch();
      }
    });
    const row = el('div', 'sf-branch-row');
    row.append(this.branchInput, this.branchButton, this.deleteButton);
    this.form.append(this.branchLabel, row);
    return this.form;
  }

  private intent(message: TreeIntent): void {
    this.send(message);
  }

  /** Draw the current state (called at most once per frame). */
  private draw(): void {
    const nodes = this.model.get('nodes') as TreeNode[];
    const selected = this.model.get('selected') as string;
    const busy = this.model.get('busy') as boolean;
    this.el.dataset.busy = String(busy);
    this.rows = layoutRows(nodes, this.model.get('current') as string);
    this.countEl.textContent = `${nodes.length} response${nodes.length === 1 ? '' : 's'}`;
    this.busyEl.hidden = !busy;
    this.errorEl.textContent = this.model.get('error') as string;
    this.drawRows(selected);
    this.drawDetail(selected, busy);
  }

  private drawRows(selected: string): void {
    const signature = JSON.stringify([this.rows.map(r => [r.id, r.guides, r.node]), selected]);
    if (signature === this.rowsSignature) {
      return; // unchanged: keep the buttons (and the focus) as they are
    }
    this.rowsSignature = signature;
    const focused = (document.activeElement as HTMLElement | null)?.dataset?.id;
    const hadFocus = this.nodesEl.contains(document.activeElement);
    this.nodesEl.replaceChildren(...this.rows.map(row => rowButton(row, selected)));
    if (!this.rows.some(r => r.id === selected) && this.rows.length) {
      (this.nodesEl.firstElementChild as HTMLElement).tabIndex = 0;
    }
    if (hadFocus && focused) {
      this.focusRow(focused);
    }
    if (!this.rows.length) {
      this.nodesEl.append(el('div', 'sf-empty', 'No stored responses yet.'));
    }
  }

  private drawDetail(selected: string, busy: boolean): void {
    const detail = this.model.get('detail') as NodeDetail | null;
    const row = this.rows.find(r => r.id === selected);
    const shown = detail && detail.id === selected ? detail : null;
    this.detailEl.dataset.selected = selected;
    this.detailHead.replaceChildren();
    if (!row) {
      this.detailHead.append(el('span', 'sf-hint', 'Select a response to see it and branch from it.'));
    } else {
      this.detailHead.append(el('span', 'sf-detail-id', shortId(selected)));
      this.detailHead.title = selected;
      if (shown) {
        this.detailHead.append(el('span', 'sf-detail-meta', `${shown.model} · ${statusLabel(shown.status)}`));
      }
    }
    this.drawInput(shown);
    this.output.update(shown ? shown.output : []);
    fillUsage(this.usageEl, shown ? shown.usage : null);
    const canAct = !!row && row.node !== null;
    this.form.hidden = !canAct;
    this.branchLabel.textContent = row?.isLeaf ? 'Continue from this response' : 'Branch from this response';
    this.branchButton.textContent = row?.isLeaf ? 'Continue' : 'Branch';
    this.branchButton.disabled = busy;
    this.branchInput.disabled = busy;
    this.deleteButton.disabled = busy;
    if (this.armedDelete !== selected) {
      this.disarm();
    }
  }

  private drawInput(detail: NodeDetail | null): void {
    this.inputEl.replaceChildren();
    for (const item of detail ? detail.input : []) {
      const block = el('div', 'sf-input-item');
      block.dataset.role = item.role;
      const body = el('div', 'sf-markdown');
      body.innerHTML = renderMarkdown(item.text); // safe: everything is escaped first
      block.append(el('span', 'sf-role', item.role || item.type), body);
      this.inputEl.append(block);
    }
  }

  private onRowClick(event: MouseEvent): void {
    const button = (event.target as HTMLElement).closest('button.sf-node') as HTMLElement | null;
    if (button?.dataset.id && this.rows.find(r => r.id === button.dataset.id)?.node) {
      this.intent({ type: 'select', id: button.dataset.id });
    }
  }

  private onKey(event: KeyboardEvent): void {
    const id = (event.target as HTMLElement).dataset?.id;
    if (!id) {
      return;
    }
    const moves: Record<string, () => string | null> = {
      ArrowDown: () => neighbour(this.rows, id, 1),
      ArrowUp: () => neighbour(this.rows, id, -1),
      ArrowLeft: () => this.rows.find(r => r.id === id)?.parentId ?? null,
      Home: () => this.rows[0]?.id ?? null,
      End: () => this.rows[this.rows.length - 1]?.id ?? null
    };
    const target = moves[event.key]?.();
    if (target) {
      event.preventDefault();
      event.stopPropagation(); // the notebook must not move its own selection too
      this.focusRow(target);
    }
  }

  private focusRow(id: string): void {
    for (const button of Array.from(this.nodesEl.querySelectorAll<HTMLElement>('button.sf-node'))) {
      button.tabIndex = button.dataset.id === id ? 0 : -1;
      if (button.dataset.id === id) {
        button.focus();
      }
    }
  }

  private onBranch(): void {
    const text = this.branchInput.value.trim();
    const id = this.model.get('selected') as string;
    if (!text || !id || this.model.get('busy')) {
      this.branchInput.focus();
      return;
    }
    this.intent({ type: 'branch', id, text });
    this.branchInput.value = '';
  }

  private onDelete(): void {
    const id = this.model.get('selected') as string;
    if (!id) {
      return;
    }
    if (this.armedDelete !== id) {
      this.armedDelete = id;
      this.deleteButton.textContent = 'Confirm delete';
      this.deleteButton.classList.add('sf-armed');
      return;
    }
    this.disarm();
    this.intent({ type: 'delete', id });
  }

  private disarm(): void {
    this.armedDelete = '';
    this.deleteButton.textContent = 'Delete';
    this.deleteButton.classList.remove('sf-armed');
  }

  /** Show the `live` ResponseView (the branch streaming now), replacing the last one. */
  private async showLive(): Promise<void> {
    const model = this.model.get('live') as DOMWidgetModel | null;
    if (this.liveView && this.liveView.model === model) {
      return;
    }
    this.liveView?.remove();
    this.liveView = null;
    this.liveEl.replaceChildren();
    if (!model) {
      return;
    }
    const view = await this.create_child_view<DOMWidgetView>(model);
    if (this.model.get('live') !== model) {
      view.remove();
      return;
    }
    this.liveView = view;
    this.liveEl.append(el('div', 'sf-live-label', 'New response'), view.el);
    view.trigger('displayed', this);
  }

  remove(): void {
    this.liveView?.remove();
    this.liveView = null;
    return super.remove();
  }
}
