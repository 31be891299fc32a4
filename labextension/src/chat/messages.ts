/**
 * The `@jupyter/chat` messages of a conversation's turns: who says them, what the panel
 * keeps on each (`metadata.superfluid`), and how a streaming answer repaints its message.
 * Pure: the chat model (`model.ts`) inserts and updates them.
 */

import type { IAttachment, IMessageContent, IUser } from '@jupyter/chat';

import type { ContextMarker } from './context';
import type { AnswerState, AnswerStatus, CallView } from './events';
import type { TurnView } from './transcript';
import type { ConversationItem } from './types';

/** What the panel keeps on each message (`metadata.superfluid`). */
export interface MessageInfo {
  role: 'user' | 'assistant';
  turn: number;
  responseId: string | null;
  parentId: string | null;
  status?: AnswerStatus;
  reasoning?: string;
  calls?: CallView[];
  model?: string;
  cachedTokens?: number | null;
  error?: string | null;
  contexts?: ContextMarker[];
}

declare module '@jupyter/chat' {
  interface IMessageMetadata {
    superfluid?: MessageInfo;
  }
}

export const USER: IUser = { username: 'you', display_name: 'You', initials: 'Y', color: 'var(--jp-brand-color1)' };

/** The assistant, named after the model that answers. */
export function botUser(model: string): IUser {
  return { username: 'superfluid', display_name: model || 'Superfluid', initials: 'SF', bot: true };
}

/** A context marker as the attachment chip `@jupyter/chat` shows. */
export function asAttachment(marker: ContextMarker): IAttachment {
  return {
    type: 'notebook',
    value: marker.path,
    cells: marker.cells.map(id => ({ id, input_type: 'code' as const }))
  };
}

/** Whether an input item is notebook context (sent before the question it belongs to). */
export function isContextItem(item: ConversationItem): boolean {
  const content = Array.isArray(item.content) ? item.content : [];
  return content.some(p => (p.text ?? '').startsWith('<notebook-context '));
}

/** The user's message of a turn. */
export function userContent(
  id: string,
  text: string,
  time: number,
  contexts: ContextMarker[],
  base: Omit<MessageInfo, 'role'>
): IMessageContent {
  return {
    type: 'msg',
    id,
    body: text,
    sender: USER,
    time,
    attachments: contexts.map(asAttachment),
    metadata: { superfluid: { role: 'user', ...base, contexts } }
  };
}

/** The messages of a stored turn: the question (when it has one) and its answer. */
export function turnMessages(turn: TurnView, time: number): IMessageContent[] {
  const out: IMessageContent[] = [];
  const base = { responseId: turn.responseId, parentId: turn.parentId, turn: turn.index };
  if (turn.userText !== null) {
    out.push(userContent(turn.userItemId ?? `user-${turn.index}`, turn.userText, time, turn.contexts, base));
  }
  if (turn.responseId || turn.answerText || turn.calls.length) {
    out.push({
      type: 'msg',
      id: `answer-${turn.responseId ?? turn.index}`,
      body: turn.answerText,
      sender: botUser(turn.model),
      time,
      metadata: {
        superfluid: {
          role: 'assistant',
          ...base,
          status: 'completed',
          reasoning: turn.reasoning,
          calls: turn.calls,
          model: turn.model
        }
      }
    });
  }
  return out;
}

/** The answer's message as it streams: its text (and why it ended, if not well) and state. */
export function answerUpdate(info: MessageInfo, state: AnswerState): Partial<IMessageContent> {
  const error = state.error ? `\n\n> **${state.status === 'error' ? 'Error' : state.status}:** ${state.error}` : '';
  return {
    body: state.text + error,
    sender: botUser(state.model),
    metadata: {
      superfluid: {
        ...info,
        responseId: state.responseId,
        status: state.status,
        reasoning: state.reasoning,
        calls: state.calls,
        model: state.model,
        cachedTokens: state.cachedTokens,
        error: state.error
      }
    }
  };
}
