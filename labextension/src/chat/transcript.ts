/**
 * A conversation's items as the chat shows them: split into turns (the input a
 * response was sent, then its output), each turn matched with its response on the
 * current branch, so that editing a message or regenerating an answer knows which
 * response to fork from. Pure.
 */

import type { CallView } from './events';
import { parseContext, type ContextMarker } from './context';
import type { ContentPart, ConversationItem, ResponseNode } from './types';

/** One turn: what was sent (user messages, function outputs) and what came back. */
export interface Turn {
  inputs: ConversationItem[];
  outputs: ConversationItem[];
}

/** One turn as the chat shows it. */
export interface TurnView {
  index: number;
  /** The response of this turn on the current branch (null: not answered yet). */
  responseId: string | null;
  /** The response this turn continued (null: the first turn). */
  parentId: string | null;
  /** The user's own words (context messages are chips, not text); null: no user message. */
  userText: string | null;
  userItemId: string | null;
  contexts: ContextMarker[];
  answerText: string;
  reasoning: string;
  calls: CallView[];
  model: string;
}

const INPUT_ROLES = new Set(['user', 'system', 'developer']);

/** Whether an item is sent (input) rather than generated (output). */
export function isInput(item: ConversationItem): boolean {
  if (item.type === 'message') {
    return INPUT_ROLES.has(item.role ?? 'user');
  }
  return item.type === 'function_call_output';
}

/** The text of a message's content (its parts joined). */
export function contentText(content: ContentPart[] | string | undefined): string {
  if (typeof content === 'string') {
    return content;
  }
  return (content ?? []).map(part => part.text ?? '').join('');
}

/** Items into turns: a new turn starts at an input that follows an output. */
export function splitTurns(items: ConversationItem[]): Turn[] {
  const turns: Turn[] = [];
  let current: Turn | null = null;
  for (const item of items) {
    const input = isInput(item);
    if (!current || (input && current.outputs.length > 0)) {
      current = { inputs: [], outputs: [] };
      turns.push(current);
    }
    (input ? current.inputs : current.outputs).push(item);
  }
  return turns;
}

/** The response ids from the root down to `head`, following `previous_response_id`. */
export function chainTo(nodes: ResponseNode[], head: string | null | undefined): string[] {
  const byId = new Map(nodes.map(n => [n.id, n] as [string, ResponseNode]));
  const chain: string[] = [];
  const seen = new Set<string>();
  let at = head ?? null;
  while (at && byId.has(at) && !seen.has(at)) {
    seen.add(at);
    chain.unshift(at);
    at = byId.get(at)?.previous_response_id ?? null;
  }
  return chain;
}

function reasoningText(item: ConversationItem): string {
  const parts = [...(item.summary ?? []), ...(Array.isArray(item.content) ? item.content : [])];
  return parts.map(p => p.text ?? '').join('');
}

function outputText(output: string | ContentPart[] | undefined): string {
  return typeof output === 'string' ? output : contentText(output);
}

/** The turns of the current branch, each with its response, as the chat shows them. */
export function turnViews(items: ConversationItem[], chain: string[], models: Map<string, string> = new Map()): TurnView[] {
  const turns = splitTurns(items);
  const outputs = new Map<string, string>();
  for (const item of items) {
    if (item.type === 'function_call_output' && item.call_id) {
      outputs.set(item.call_id, outputText(item.output));
    }
  }
  return turns.map((turn, index) => {
    const texts: string[] = [];
    const contexts: ContextMarker[] = [];
    let userItemId: string | null = null;
    for (const item of turn.inputs) {
      if (item.type !== 'message' || (item.role ?? 'user') !== 'user') {
        continue;
      }
      const text = contentText(item.content);
      const marker = parseContext(text);
      if (marker) {
        contexts.push(marker);
      } else {
        texts.push(text);
        userItemId = item.id ?? userItemId;
      }
    }
    const answer: string[] = [];
    const reasoning: string[] = [];
    const calls: CallView[] = [];
    for (const item of turn.outputs) {
      if (item.type === 'message') {
        answer.push(contentText(item.content));
      } else if (item.type === 'reasoning') {
        reasoning.push(reasoningText(item));
      } else if (item.type === 'function_call') {
        const callId = item.call_id ?? item.id ?? '';
        const output = outputs.get(callId);
        calls.push({
          itemId: item.id ?? callId,
          callId,
          name: item.name ?? '',
          arguments: item.arguments ?? '',
          output,
          state: output === undefined ? undefined : 'done'
        });
      }
    }
    const responseId = turn.outputs.length > 0 || index < chain.length ? (chain[index] ?? null) : null;
    return {
      index,
      responseId,
      parentId: index > 0 ? (chain[index - 1] ?? null) : null,
      userText: texts.length > 0 || contexts.length > 0 ? texts.join('\n\n') : null,
      userItemId,
      contexts,
      answerText: answer.join('\n\n'),
      reasoning: reasoning.join('\n\n'),
      calls,
      model: responseId ? (models.get(responseId) ?? '') : ''
    };
  });
}

/** A turn's input items as they can be sent again (ids dropped). */
export function resendable(items: ConversationItem[]): ConversationItem[] {
  return items.map(item => {
    const { id: _id, status: _status, ...rest } = item;
    void _id;
    void _status;
    return rest;
  });
}

/** A user message item with this text. */
export function userMessage(text: string): ConversationItem {
  return { type: 'message', role: 'user', content: [{ type: 'input_text', text }] };
}

/** The tree's leaves under `id` (itself when it has no children), newest last. */
export function leavesUnder(nodes: ResponseNode[], id: string): string[] {
  const children = new Map<string, string[]>();
  for (const n of nodes) {
    if (n.previous_response_id) {
      children.set(n.previous_response_id, [...(children.get(n.previous_response_id) ?? []), n.id]);
    }
  }
  const leaves: string[] = [];
  const visit = (at: string) => {
    const kids = children.get(at) ?? [];
    if (kids.length === 0) {
      leaves.push(at);
    }
    kids.forEach(visit);
  };
  visit(id);
  return leaves;
}
