/**
 * The panel's state beside the messages: the user's chats (newest first, searched
 * on the server), which one is open (remembered across reloads), renaming and
 * deleting, and the model the next message goes to (loading it when it is not).
 */

import { Signal, type ISignal } from '@lumino/signaling';

import type { ChatApi } from './api';
import type { SuperfluidChatModel } from './model';
import type { ModelsStore } from './models';
import { sortChats, upsertChat } from './titles';
import type { ChatSettings, Conversation } from './types';

const LAST_CHAT = 'jupyter-superfluid:chat:last';

export class ChatController {
  constructor(
    readonly api: ChatApi,
    readonly model: SuperfluidChatModel,
    readonly models: ModelsStore,
    readonly settings: () => ChatSettings
  ) {
    model.created.connect((_, conv) => this.add(conv));
    model.answered.connect((_, conv) => this.add(conv));
    models.changed.connect(() => this.pickDefault());
  }

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Asks the panel to show and focus the model picker. */
  get pickerRequested(): ISignal<this, void> {
    return this._pickerRequested;
  }

  get chats(): Conversation[] {
    return this._chats;
  }

  get query(): string {
    return this._query;
  }

  get error(): string {
    return this._error;
  }

  /** Read the chats and open the last one (or none). */
  async start(): Promise<void> {
    await this.refresh();
    const last = localStorage.getItem(LAST_CHAT);
    if (last && this._chats.some(c => c.id === last)) {
      await this.open(last);
    } else {
      await this.open(null);
    }
    this.pickDefault();
  }

  /** The chats matching the search box, from the server. */
  async refresh(): Promise<void> {
    const q = this._query;
    try {
      const page = await this.api.listConversations(q);
      if (q === this._query) {
        this._chats = sortChats(page.data);
        this._error = '';
      }
    } catch (err) {
      this._error = `The chats could not be listed: ${(err as Error).message}`;
    }
    this._changed.emit();
  }

  search(query: string): void {
    this._query = query;
    this._changed.emit();
    if (this._timer !== null) {
      clearTimeout(this._timer);
    }
    this._timer = setTimeout(() => {
      this._timer = null;
      void this.refresh();
    }, 200);
  }

  async open(id: string | null): Promise<void> {
    try {
      await this.model.open(id);
      if (id) {
        localStorage.setItem(LAST_CHAT, id);
      } else {
        localStorage.removeItem(LAST_CHAT);
      }
      this._error = '';
    } catch (err) {
      this._error = `The chat could not be opened: ${(err as Error).message}`;
    }
    this._changed.emit();
  }

  /** A new chat (created on the server with its first message). */
  async newChat(): Promise<void> {
    await this.open(null);
    this.model.input.focus();
  }

  async rename(id: string, title: string): Promise<void> {
    const conv = this._chats.find(c => c.id === id);
    const metadata = { ...(conv?.metadata ?? {}), title: title.trim() };
    try {
      const renamed = await this.api.updateConversation(id, metadata);
      this._chats = this._chats.map(c => (c.id === id ? renamed : c));
    } catch (err) {
      this._error = `Rename failed: ${(err as Error).message}`;
    }
    this._changed.emit();
  }

  /** Delete a chat and every response it holds. */
  async remove(id: string): Promise<void> {
    try {
      await this.api.deleteConversation(id);
      this._chats = this._chats.filter(c => c.id !== id);
      if (this.model.conversation?.id === id) {
        await this.open(null);
      }
    } catch (err) {
      this._error = `Delete failed: ${(err as Error).message}`;
    }
    this._changed.emit();
  }

  /** The model for the next message; loading it when it is not loaded. */
  async pickModel(id: string): Promise<void> {
    this.model.modelId = id;
    this._picked = true;
    this._changed.emit();
    const served = this.models.get(id);
    // A model still downloading is asked to load too: it loads once its files are there.
    if (served && served.state !== 'loaded' && served.state !== 'loading') {
      try {
        await this.models.load(id);
      } catch (err) {
        this._error = `Loading ${id} failed: ${(err as Error).message}`;
        this._changed.emit();
      }
    }
  }

  requestPicker(): void {
    this._pickerRequested.emit();
  }

  /** The settings' default, else a loaded model, else the first served one. */
  private pickDefault(): void {
    if (this._picked || this.model.modelId) {
      return;
    }
    const all = this.models.models;
    const wanted = this.settings().defaultModel;
    const chosen =
      all.find(m => m.id === wanted) ?? all.find(m => m.state === 'loaded') ?? all[0];
    if (chosen) {
      this.model.modelId = chosen.id;
      this._changed.emit();
    }
  }

  private add(conv: Conversation): void {
    this._chats = upsertChat(this._chats, conv);
    localStorage.setItem(LAST_CHAT, conv.id);
    this._changed.emit();
    void this.refresh(); // the server's title (from the first message) and order
  }

  private _chats: Conversation[] = [];
  private _query = '';
  private _error = '';
  private _picked = false;
  private _timer: ReturnType<typeof setTimeout> | null = null;
  private _changed = new Signal<this, void>(this);
  private _pickerRequested = new Signal<this, void>(this);
}
