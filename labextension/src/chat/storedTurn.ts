/**
 * A finished turn applied to the panel's copy of its conversation, from the stream
 * alone: each round's input as sent, its response's stored output, and the new head.
 * The server stores a response before it streams `response.completed` (durable before
 * visible), so this is what a read would return, without the three reads after every
 * answer. Pure.
 */

import type { AnswerState } from './events';
import { TITLE_CHARS } from './titles';
import type { Turn } from './transcript';
import type { Conversation, ConversationItem, ResponseNode } from './types';

/** One request of a turn (a turn with tool calls has one per tool round). */
export interface Round {
  input: ConversationItem[];
  answer: AnswerState;
}

/** What the panel shows of a conversation: its head, its branch's items, its tree. */
export interface StoredView {
  conv: Conversation;
  items: ConversationItem[];
  nodes: ResponseNode[];
}

/** Whether every round finished with a stored response the stream described whole. */
export function isWhole(rounds: Round[]): boolean {
  return (
    rounds.length > 0 &&
    rounds.every(
      r => r.answer.responseId !== null && r.answer.output !== null && (r.answer.status === 'completed' || r.answer.status === 'incomplete')
    )
  );
}

/** The conversation after `rounds`, continuing the first `keep` turns from `parentId`. */
export function applyTurn(conv: Conversation, kept: Turn[], parentId: string | null, nodes: ResponseNode[], rounds: Round[]): StoredView {
  const items = kept.flatMap(t => [...t.inputs, ...t.outputs]);
  const added: ResponseNode[] = [];
  let previous = parentId;
  for (const { input, answer } of rounds) {
    const id = answer.responseId ?? '';
    items.push(...input, ...(answer.output ?? []));
    added.push({
      id,
      previous_response_id: answer.previousResponseId ?? previous,
      created_at: answer.createdAt ?? conv.updated_at ?? conv.created_at,
      status: answer.status,
      model: answer.model,
      preview: previewOf(input, answer.output ?? [])
    });
    previous = id;
  }
  const last = added[added.length - 1];
  const next: Conversation = {
    ...conv,
    head_response_id: last?.id ?? conv.head_response_id,
    updated_at: last?.created_at ?? conv.updated_at,
    title: conv.title || firstText(items)
  };
  return { conv: next, items, nodes: [...nodes, ...added] };
}

/** The tree's line for a response, as the server makes it: the last input, then the answer. */
export function previewOf(input: ConversationItem[], output: ConversationItem[], n = 80): string {
  const typedIn = input.filter(i => i.type !== 'reasoning');
  const last = typedIn.length ? itemText(typedIn[typedIn.length - 1]) : '';
  const message = output.find(i => i.type === 'message');
  return (last.slice(0, n / 2) + ' → ' + (message ? itemText(message) : '')).slice(0, n);
}

function itemText(item: ConversationItem): string {
  if (item.type === 'message') {
    return partsText(item.content);
  }
  if (item.type === 'function_call') {
    return item.name ?? '';
  }
  return item.type === 'function_call_output' ? partsText(item.output) : '';
}

function partsText(content: ConversationItem['content']): string {
  return typeof content === 'string' ? content : (content ?? []).map(p => p.text ?? p.refusal ?? '').join('');
}

/** The server's title of a new chat: its first message's text, whitespace folded, cut. */
export function firstText(items: ConversationItem[]): string {
  for (const item of items) {
    if (item.type !== 'message' || !item.content) {
      continue;
    }
    const raw = typeof item.content === 'string' ? item.content : item.content.map(p => p.text ?? '').join(' ');
    const text = raw.split(/\s+/).filter(Boolean).join(' ');
    if (text) {
      return text.slice(0, TITLE_CHARS);
    }
  }
  return '';
}
