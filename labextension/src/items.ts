/**
 * DOM for output items (reasoning, message, function call) and usage, shared by the
 * response view and the tree's detail pane. Each item keeps its element between
 * renders; only an item whose content changed is drawn again, and a reasoning
 * block keeps the open/closed state the user gave it.
 */

import type { FunctionCallItem, OutputItem, Usage } from './contract';
import { prettyJson, usageParts } from './format';
import { escapeHtml, renderMarkdown } from './markdown';

/** Create an element with a class and optional text. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className = '',
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  if (tag === 'button' || tag === 'input') {
    // Keys pressed here are for this control. Notebook shortcuts whose selector matches the
    // focused element itself (arrows, Enter in command mode) must not run, so the mark is
    // on the control, not only on the widget.
    node.dataset.lmSuppressShortcuts = 'true';
  }
  return node;
}

/** What decides whether an item must be drawn again. */
function signature(item: OutputItem): string {
  const extra = item.type === 'function_call' ? `${item.arguments.length}|${item.output}` : '';
  return `${item.type}|${item.status}|${'text' in item ? item.text.length : 0}|${extra}`;
}

function fillReasoning(node: HTMLElement, item: OutputItem & { type: 'reasoning' }): void {
  let details = node.querySelector('details');
  if (!details) {
    details = el('details', 'sf-reasoning');
    details.append(el('summary'), el('div', 'sf-reasoning-text'));
    node.append(details);
  }
  const words = item.text.split(/\s+/).filter(Boolean).length;
  const label = item.status === 'in_progress' ? 'Thinking…' : 'Reasoning';
  const count = `${words} word${words === 1 ? '' : 's'}`;
  (details.querySelector('summary') as HTMLElement).textContent = `${label} (${count})`;
  (details.querySelector('.sf-reasoning-text') as HTMLElement).textContent = item.text;
}

function fillCall(node: HTMLElement, item: FunctionCallItem): void {
  node.replaceChildren();
  const head = el('div', 'sf-call-head');
  head.append(el('span', 'sf-call-icon', 'ƒ'));
  if (item.namespace) {
    head.append(el('span', 'sf-call-namespace', `${item.namespace}.`));
  }
  head.append(el('span', 'sf-call-name', item.name || '…'));
  head.append(el('span', 'sf-call-id', item.call_id));
  node.append(head, el('pre', 'sf-call-args', prettyJson(item.arguments)));
  if (item.output !== null) {
    const out = el('div', 'sf-call-output');
    out.append(el('span', 'sf-call-output-label', 'output'), el('pre', '', prettyJson(item.output)));
    node.append(out);
  }
}

/** Draw `item` into `node` (created for this item's type). */
export function fillItem(node: HTMLElement, item: OutputItem): void {
  node.dataset.status = item.status;
  if (item.type === 'reasoning') {
    fillReasoning(node, item);
  } else if (item.type === 'function_call') {
    fillCall(node, item);
  } else {
    node.innerHTML = renderMarkdown(item.text); // safe: the renderer escapes all input
  }
}

const ITEM_CLASSES: Record<OutputItem['type'], string> = {
  reasoning: 'sf-item sf-item-reasoning',
  message: 'sf-item sf-item-message sf-markdown',
  function_call: 'sf-item sf-item-call sf-call'
};

/** Keeps a container's item elements in step with a list of items. */
export class ItemList {
  private readonly nodes = new Map<string, { node: HTMLElement; sig: string }>();

  constructor(readonly container: HTMLElement) {}

  /** Bring the container up to date with `items`; returns how many items were drawn. */
  update(items: OutputItem[]): number {
    let drawn = 0;
    const keep = new Set<string>();
    items.forEach((item, index) => {
      const key = `${item.type}:${item.id || index}`;
      keep.add(key);
      let entry = this.nodes.get(key);
      if (!entry) {
        entry = { node: el('div', ITEM_CLASSES[item.type]), sig: '' };
        entry.node.dataset.type = item.type;
        this.nodes.set(key, entry);
      }
      if (this.container.children[index] !== entry.node) {
        this.container.insertBefore(entry.node, this.container.children[index] ?? null);
      }
      const sig = signature(item);
      if (sig !== entry.sig) {
        fillItem(entry.node, item);
        entry.sig = sig;
        drawn += 1;
      }
    });
    for (const [key, entry] of this.nodes) {
      if (!keep.has(key)) {
        entry.node.remove();
        this.nodes.delete(key);
      }
    }
    return drawn;
  }
}

/** Draw a usage line into `node` (emptied when there is no usage yet). */
export function fillUsage(node: HTMLElement, usage: Usage | null): void {
  node.replaceChildren();
  if (!usage) {
    return;
  }
  for (const part of usageParts(usage)) {
    const span = el('span', 'sf-usage-part');
    span.dataset.key = part.key;
    span.title = part.title;
    span.innerHTML = `<span class="sf-usage-value">${escapeHtml(part.value)}</span> <span class="sf-usage-label">${escapeHtml(part.label)}</span>`;
    node.append(span);
  }
}
