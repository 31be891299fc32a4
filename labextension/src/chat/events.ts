/**
 * The Responses API's stream events reduced into one answer as the panel shows it:
 * its text, its reasoning, its function calls and its status. Pure, so it is tested
 * without a server; the model applies each event as it arrives.
 */

import type { ConversationItem } from './types';

/** A function call of an answer (with its output once the kernel ran it). */
export interface CallView {
  itemId: string;
  callId: string;
  name: string;
  arguments: string;
  output?: string;
  /** pending approval, running, done, declined (the panel's tool flow). */
  state?: 'pending' | 'running' | 'done' | 'declined';
}

/** Where an answer is. */
export type AnswerStatus = 'in_progress' | 'completed' | 'incomplete' | 'failed' | 'stopped' | 'error';

/** One answer, as far as it streamed. */
export interface AnswerState {
  responseId: string | null;
  previousResponseId: string | null;
  model: string;
  status: AnswerStatus;
  text: string;
  reasoning: string;
  calls: CallView[];
  error: string | null;
  cachedTokens: number | null;
  inputTokens: number | null;
  outputTokens: number | null;
  /** The output index of the message the text came from last (a new one starts a paragraph). */
  textIndex: number | null;
  /** The stored output items, as the finished response gives them (null until then). */
  output: ConversationItem[] | null;
  /** When the response was created (seconds; null until the stream says). */
  createdAt: number | null;
}

/** An answer that has not started. */
export function emptyAnswer(model = ''): AnswerState {
  return {
    responseId: null,
    previousResponseId: null,
    model,
    status: 'in_progress',
    text: '',
    reasoning: '',
    calls: [],
    error: null,
    cachedTokens: null,
    inputTokens: null,
    outputTokens: null,
    textIndex: null,
    output: null,
    createdAt: null
  };
}

interface ResponseObject {
  id?: string;
  model?: string;
  status?: string;
  previous_response_id?: string | null;
  created_at?: number;
  output?: ConversationItem[];
  error?: { message?: string } | null;
  incomplete_details?: { reason?: string } | null;
  usage?: {
    input_tokens?: number;
    output_tokens?: number;
    input_tokens_details?: { cached_tokens?: number };
  } | null;
}

/** One event's payload, as far as the reducer reads it. */
export interface StreamEvent {
  type: string;
  delta?: string;
  output_index?: number;
  item_id?: string;
  arguments?: string;
  item?: { type?: string; id?: string; call_id?: string; name?: string; arguments?: string };
  response?: ResponseObject;
  message?: string;
  code?: string | null;
  error?: { message?: string; code?: string | null };
}

function withResponse(state: AnswerState, r: ResponseObject | undefined): AnswerState {
  if (!r) {
    return state;
  }
  const usage = r.usage ?? null;
  return {
    ...state,
    responseId: r.id ?? state.responseId,
    previousResponseId: r.previous_response_id ?? state.previousResponseId,
    model: r.model ?? state.model,
    createdAt: r.created_at ?? state.createdAt,
    cachedTokens: usage?.input_tokens_details?.cached_tokens ?? state.cachedTokens,
    inputTokens: usage?.input_tokens ?? state.inputTokens,
    outputTokens: usage?.output_tokens ?? state.outputTokens
  };
}

function updateCall(state: AnswerState, itemId: string, change: (c: CallView) => CallView): AnswerState {
  return { ...state, calls: state.calls.map(c => (c.itemId === itemId ? change(c) : c)) };
}

/** The answer after one more event (unknown events change nothing). */
export function reduceEvent(state: AnswerState, event: StreamEvent): AnswerState {
  switch (event.type) {
    case 'response.created':
    case 'response.in_progress':
      return withResponse(state, event.response);
    case 'response.output_text.delta': {
      const index = event.output_index ?? null;
      const gap = state.text && index !== null && state.textIndex !== null && index !== state.textIndex;
      return { ...state, text: state.text + (gap ? '\n\n' : '') + (event.delta ?? ''), textIndex: index };
    }
    case 'response.reasoning_text.delta':
    case 'response.reasoning.delta':
    case 'response.reasoning_summary_text.delta':
      return { ...state, reasoning: state.reasoning + (event.delta ?? '') };
    case 'response.output_item.added':
    case 'response.output_item.done': {
      const item = event.item;
      if (item?.type !== 'function_call') {
        return state;
      }
      const itemId = item.id ?? item.call_id ?? `call-${state.calls.length}`;
      if (state.calls.some(c => c.itemId === itemId)) {
        return item.arguments === undefined
          ? state
          : updateCall(state, itemId, c => ({ ...c, arguments: item.arguments ?? c.arguments }));
      }
      const call = { itemId, callId: item.call_id ?? itemId, name: item.name ?? '', arguments: item.arguments ?? '' };
      return { ...state, calls: [...state.calls, call] };
    }
    case 'response.function_call_arguments.delta':
      return updateCall(state, event.item_id ?? '', c => ({ ...c, arguments: c.arguments + (event.delta ?? '') }));
    case 'response.function_call_arguments.done':
      return updateCall(state, event.item_id ?? '', c => ({ ...c, arguments: event.arguments ?? c.arguments }));
    case 'response.completed':
    case 'response.incomplete':
    case 'response.failed': {
      const next = withResponse(state, event.response);
      const status = event.type.slice('response.'.length) as AnswerStatus;
      const error = event.response?.error?.message ?? (status === 'failed' ? 'the response failed' : null);
      return { ...next, status, error, output: event.response?.output ?? null };
    }
    case 'error': {
      const message = event.error?.message ?? event.message ?? 'the stream failed';
      return { ...state, status: 'error', error: message };
    }
    default:
      return state;
  }
}

/** Whether an answer has finished (well or not). */
export function isFinished(state: AnswerState): boolean {
  return state.status !== 'in_progress';
}
