/**
 * The chat model of `@jupyter/chat` over one of this server's conversations: its
 * messages are the current branch's turns; sending streams `POST v1/responses` with
 * `conversation`; editing an earlier message or regenerating an answer forks a new
 * branch from the response before it (warm); stop aborts the stream (the server
 * stores nothing); switching branch moves the conversation's head.
 */

import {
  AbstractChatContext,
  AbstractChatModel,
  type IChatContext,
  type IChatModel,
  type IMessageContent,
  type INewMessage,
  type INotebookAttachment,
  type IUser
} from '@jupyter/chat';
import { Signal, type ISignal } from '@lumino/signaling';

import type { ApiError, ChatApi, ResponseBody } from './api';
import type { ContextMarker } from './context';
import { emptyAnswer, reduceEvent, type AnswerState, type CallView } from './events';
import { answerUpdate, botUser, isContextItem, turnMessages, USER, userContent } from './messages';
import { requestBody, type ForkFrom } from './request';
import { applyTurn, isWhole, type Round } from './storedTurn';
import { chainTo, resendable, splitTurns, turnViews, userMessage, type Turn, type TurnView } from './transcript';
import type { ChatSettings, Conversation, ConversationItem, ResponseNode } from './types';

/** Context the notebook supplies for the attachments of a message. */
export interface ContextResult {
  items: ConversationItem[];
  markers: ContextMarker[];
}

/** Resolves notebook attachments to context items, cut to fit the model. */
export type ContextProvider = (
  attachments: INotebookAttachment[],
  question: ConversationItem,
  model: string,
  conversation: string | null
) => Promise<ContextResult>;

/** Runs the tools an answer called (and asks before, unless auto-approved). */
export type ToolRunner = (calls: CallView[], update: () => void) => Promise<ConversationItem[] | null>;

/** How a turn is run: its input, where it starts, what it shows. */
interface RunSpec {
  input: ConversationItem[];
  /** undefined: continue the head; null: a new branch from the root; id: fork there. */
  forkFrom?: ForkFrom;
  /** Turns of the current view kept before this one. */
  keep: number;
  userText: string | null;
  contexts: ContextMarker[];
}

class Context extends AbstractChatContext {
  get users(): IUser[] {
    return [USER, botUser('')];
  }
}

/** Options of the model. */
export interface SuperfluidChatOptions extends IChatModel.IOptions {
  api: ChatApi;
  settings: () => ChatSettings;
}

export class SuperfluidChatModel extends AbstractChatModel {
  constructor(options: SuperfluidChatOptions) {
    super({ ...options, config: { sendWithShiftEnter: false, stackMessages: false, enableCodeToolbar: true, ...options.config } });
    this.api = options.api;
    this.settings = options.settings;
  }

  readonly api: ChatApi;
  readonly settings: () => ChatSettings;
  contextProvider: ContextProvider | null = null;
  toolRunner: ToolRunner | null = null;
  /** Tools offered with each request (the kernel's, when enabled). */
  tools: () => Promise<unknown[]> = async () => [];

  get user(): IUser {
    return USER;
  }

  /** The state of the panel changed (conversation, branch, busy, model). */
  get stateChanged(): ISignal<this, void> {
    return this._stateChanged;
  }

  get conversation(): Conversation | null {
    return this._conversation;
  }

  get nodes(): ResponseNode[] {
    return this._nodes;
  }

  get head(): string | null {
    return this._conversation?.head_response_id ?? null;
  }

  get turns(): TurnView[] {
    return this._turns;
  }

  get busy(): boolean {
    return this._abort !== null;
  }

  /** The model the next message goes to. */
  get modelId(): string {
    return this._modelId;
  }

  set modelId(id: string) {
    if (id !== this._modelId) {
      this._modelId = id;
      this._stateChanged.emit();
    }
  }

  /** The last error, shown under the chat ('' for none). */
  get error(): string {
    return this._error;
  }

  createChatContext(): IChatContext {
    return new Context({ model: this });
  }

  /** Show a conversation (null: a new, not yet created chat). */
  async open(id: string | null): Promise<void> {
    this.stop();
    this._conversation = null;
    this._nodes = [];
    this._rawTurns = [];
    this._turns = [];
    this.clearMessages();
    this._error = '';
    if (id) {
      await this.reload(id);
    } else {
      this._stateChanged.emit();
    }
  }

  /** Read the conversation, its branch and tree again, and show them. */
  async reload(id = this._conversation?.id): Promise<void> {
    if (!id) {
      return;
    }
    const [conv, items, nodes] = await Promise.all([
      this.api.getConversation(id),
      this.api.items(id),
      this.api.responses(id)
    ]);
    this.show(conv, items, nodes);
  }

  /** Show fetched state (the model list's messages replaced). */
  show(conv: Conversation, items: ConversationItem[], nodes: ResponseNode[]): void {
    this._conversation = conv;
    this._nodes = nodes;
    const chain = chainTo(nodes, conv.head_response_id);
    const models = new Map(nodes.map(n => [n.id, n.model ?? ''] as [string, string]));
    this._rawTurns = splitTurns(items);
    this._turns = turnViews(items, chain, models);
    const times = new Map(nodes.map(n => [n.id, n.created_at] as [string, number]));
    this.clearMessages();
    const messages = this._turns.flatMap(t => turnMessages(t, times.get(t.responseId ?? '') ?? conv.created_at));
    if (messages.length) {
      this.messagesInserted(0, messages);
    }
    const last = chain.length ? models.get(chain[chain.length - 1]) : undefined;
    if (!this._modelId && last) {
      this._modelId = last;
    }
    this._stateChanged.emit();
  }

  sendMessage(message: INewMessage): Promise<boolean> {
    const attachments = this.input.attachments.filter((a): a is INotebookAttachment => a.type === 'notebook');
    this.input.clearAttachments();
    return this.ask(message.body, attachments);
  }

  /** Send a question with notebook attachments, continuing the current branch. */
  async ask(text: string, attachments: INotebookAttachment[] = []): Promise<boolean> {
    if (this.busy) {
      return false;
    }
    const question = userMessage(text);
    let context: ContextResult = { items: [], markers: [] };
    if (attachments.length && this.contextProvider) {
      await this.ensureConversation();
      context = await this.contextProvider(attachments, question, this._modelId, this._conversation?.id ?? null);
    }
    return this.run({
      input: [...context.items, question],
      keep: this._turns.length,
      userText: text,
      contexts: context.markers
    });
  }

  /** Edit user message `id`: a new branch from the response before it. */
  updateMessage(id: string, content: IMessageContent): Promise<boolean> {
    const turn = this._turns.find(t => t.userItemId === id || `user-${t.index}` === id);
    if (!turn || this.busy || typeof content.body !== 'string') {
      return Promise.resolve(false);
    }
    const contexts = this._rawTurns[turn.index]?.inputs.filter(i => i.type === 'message' && turn.contexts.length && isContextItem(i)) ?? [];
    return this.run({
      input: [...resendable(contexts), userMessage(content.body)],
      forkFrom: turn.parentId,
      keep: turn.index,
      userText: content.body,
      contexts: turn.contexts
    });
  }

  /** Regenerate the answer of turn `index`: the same input, from the response before it. */
  regenerate(index: number): Promise<boolean> {
    const turn = this._turns[index];
    const raw = this._rawTurns[index];
    if (!turn || !raw || this.busy) {
      return Promise.resolve(false);
    }
    return this.run({
      input: resendable(raw.inputs),
      forkFrom: turn.parentId,
      keep: index,
      userText: turn.userText,
      contexts: turn.contexts
    });
  }

  /** Show the branch that ends at `responseId`. */
  async switchBranch(responseId: string): Promise<void> {
    const id = this._conversation?.id;
    if (!id || this.busy) {
      return;
    }
    await this.api.switchBranch(id, responseId);
    await this.reload(id);
  }

  /** Abort the stream: the server stops generating and stores nothing. */
  stop(): void {
    this._abort?.abort();
  }

  /** The conversation, created on the first message. */
  async ensureConversation(): Promise<Conversation> {
    if (!this._conversation) {
      this._conversation = await this.api.createConversation();
      this._created.emit(this._conversation);
    }
    return this._conversation;
  }

  /** A conversation was created (the list adds it). */
  get created(): ISignal<this, Conversation> {
    return this._created;
  }

  /** A turn finished (the list moves the chat to the top). */
  get answered(): ISignal<this, Conversation> {
    return this._answered;
  }

  private async run(spec: RunSpec): Promise<boolean> {
    const model = this._modelId;
    if (!model) {
      this.fail('no model is served');
      return false;
    }
    this._abort = new AbortController();
    const signal = this._abort.signal;
    this._error = '';
    const now = Date.now() / 1000;
    const first = this.messages.findIndex(m => (m.metadata?.superfluid?.turn ?? 0) >= spec.keep);
    if (first >= 0) {
      this.messagesDeleted(first, this.messages.length - first);
    }
    const parentId = spec.forkFrom === undefined ? this.head : spec.forkFrom;
    const base = { turn: spec.keep, responseId: null, parentId };
    const added: IMessageContent[] = [];
    if (spec.userText !== null) {
      added.push(userContent(`user-pending-${now}`, spec.userText, now, spec.contexts, base));
    }
    const answerId = `answer-pending-${now}`;
    added.push({
      type: 'msg',
      id: answerId,
      body: '',
      sender: botUser(model),
      time: now,
      metadata: { superfluid: { role: 'assistant', ...base, status: 'in_progress', model } }
    });
    this.messagesInserted(this.messages.length, added);
    this.updateWriters([{ user: botUser(model) }]);
    this._stateChanged.emit();
    let state = emptyAnswer(model);
    let input = spec.input;
    let forkFrom = spec.forkFrom;
    const rounds: Round[] = [];
    try {
      const conv = await this.ensureConversation();
      for (let round = 0; round < 8; round++) {
        const body = await this.body(model, conv.id, input, forkFrom, round === 0);
        state = await this.stream(body, signal, state, answerId);
        rounds.push({ input, answer: state });
        if (state.status !== 'completed' || !state.calls.some(c => c.output === undefined) || !this.toolRunner) {
          break;
        }
        const outputs = await this.toolRunner(state.calls, () => this.paint(answerId, state));
        if (!outputs || signal.aborted) {
          break;
        }
        input = outputs;
        forkFrom = undefined; // the tool outputs continue the new head
        state = { ...state, status: 'in_progress' };
      }
    } catch (err) {
      if (signal.aborted) {
        state = { ...state, status: 'stopped' };
      } else {
        state = { ...state, status: 'error', error: (err as ApiError).message ?? String(err) };
        this._error = state.error ?? '';
      }
    } finally {
      this._abort = null;
      this.updateWriters([]);
    }
    this.paint(answerId, state);
    this._stateChanged.emit();
    if (state.status === 'stopped' || (state.status === 'error' && !state.responseId)) {
      return false;
    }
    try {
      await this.settle(spec.keep, parentId, rounds);
      if (this._conversation) {
        this._answered.emit(this._conversation);
      }
    } catch (err) {
      this.fail(String(err));
    }
    return true;
  }

  /** Show the finished turn: from the stream when it described every round whole, else read. */
  private async settle(keep: number, parentId: string | null, rounds: Round[]): Promise<void> {
    const conv = this._conversation;
    if (!conv || !isWhole(rounds)) {
      return this.reload();
    }
    const view = applyTurn(conv, this._rawTurns.slice(0, keep), parentId, this._nodes, rounds);
    this.show(view.conv, view.items, view.nodes);
  }

  private async body(
    model: string,
    conversation: string,
    input: ConversationItem[],
    forkFrom: ForkFrom,
    first: boolean
  ): Promise<ResponseBody> {
    const tools = await this.tools();
    return requestBody(this.settings(), { model, conversation, input, forkFrom, first }, tools);
  }

  private async stream(body: ResponseBody, signal: AbortSignal, start: AnswerState, answerId: string): Promise<AnswerState> {
    let state: AnswerState = { ...start, responseId: null };
    let timer: ReturnType<typeof setTimeout> | null = null;
    for await (const event of this.api.streamResponse(body, signal)) {
      state = reduceEvent(state, event);
      if (timer === null) {
        timer = setTimeout(() => {
          timer = null;
          this.paint(answerId, state);
        }, 40);
      }
    }
    if (timer !== null) {
      clearTimeout(timer);
    }
    return state;
  }

  private paint(answerId: string, state: AnswerState): void {
    const message = this.messages.find(m => m.id === answerId);
    const info = message?.metadata?.superfluid;
    if (!message || !info) {
      return;
    }
    message.update(answerUpdate(info, state));
  }

  private fail(message: string): void {
    this._error = message;
    this._stateChanged.emit();
  }

  private _conversation: Conversation | null = null;
  private _nodes: ResponseNode[] = [];
  private _rawTurns: Turn[] = [];
  private _turns: TurnView[] = [];
  private _modelId = '';
  private _error = '';
  private _abort: AbortController | null = null;
  private _stateChanged = new Signal<this, void>(this);
  private _created = new Signal<this, Conversation>(this);
  private _answered = new Signal<this, Conversation>(this);
}
