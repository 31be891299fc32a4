/**
 * The served models and their lifecycle states, live: `GET v1/models` first, then
 * the models API's event stream (`superfluid/v1/models/events`: a snapshot, then
 * every change, with download progress), reconnecting when it drops. The model
 * picker and the status bar item read it.
 */

import { Signal, type ISignal } from '@lumino/signaling';

import type { ChatApi, ModelObject } from './api';
import type { ModelProgressInfo, ServedModel } from './types';

interface StateObject {
  id: string;
  state?: string;
  progress?: ModelProgressInfo | null;
  error?: string | null;
  context_size?: number;
}

/** A model object of `/v1/models` as a served model. */
export function fromModelObject(m: ModelObject): ServedModel {
  const s = m.superfluid ?? {};
  return {
    id: m.id,
    state: s.state ?? 'available',
    progress: (s.progress as ModelProgressInfo | null | undefined) ?? null,
    error: s.error ?? null,
    contextSize: s.context_size ?? null
  };
}

/** A served model after one state of the models API (the context size is kept). */
export function mergeState(prev: ServedModel | undefined, s: StateObject): ServedModel {
  return {
    id: s.id,
    state: s.state ?? prev?.state ?? 'available',
    progress: s.progress ?? null,
    error: s.error ?? null,
    contextSize: s.context_size ?? (s.state === 'loaded' || s.state === undefined ? (prev?.contextSize ?? null) : null)
  };
}

/** The served models, following the server's events. */
export class ModelsStore {
  constructor(private readonly api: ChatApi) {}

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** In the server's order. */
  get models(): ServedModel[] {
    return [...this._models.values()];
  }

  get(id: string): ServedModel | undefined {
    return this._models.get(id);
  }

  /** Whether the event stream is connected. */
  get live(): boolean {
    return this._live;
  }

  /** Read the list and follow the events (until `dispose`). */
  async start(): Promise<void> {
    await this.refresh();
    void this.follow();
  }

  async refresh(): Promise<void> {
    try {
      const list = await this.api.models();
      const next = new Map<string, ServedModel>();
      for (const m of list) {
        next.set(m.id, fromModelObject(m));
      }
      this._models = next;
      this._changed.emit();
    } catch (err) {
      console.warn('superfluid chat: the models list failed', err);
    }
  }

  /** Start loading a model; its progress comes with the events. */
  async load(id: string): Promise<void> {
    const prev = this._models.get(id);
    if (prev && prev.state !== 'loaded') {
      const fetching = prev.state === 'not_downloaded' || prev.state === 'downloading';
      this._models.set(id, { ...prev, state: fetching ? 'downloading' : 'loading' });
      this._changed.emit();
    }
    await this.api.loadModel(id);
  }

  dispose(): void {
    this._disposed = true;
    this._abort?.abort();
  }

  private async follow(): Promise<void> {
    while (!this._disposed) {
      this._abort = new AbortController();
      try {
        for await (const { data } of this.api.modelEvents(this._abort.signal)) {
          this.apply(JSON.parse(data));
          if (!this._live) {
            this._live = true;
            this._changed.emit();
          }
        }
      } catch {
        // dropped: reconnect below
      }
      if (this._live) {
        this._live = false;
        this._changed.emit();
      }
      if (!this._disposed) {
        await new Promise(resolve => setTimeout(resolve, 3000));
        await this.refresh();
      }
    }
  }

  private apply(payload: { type?: string; data?: StateObject[]; model?: StateObject }): void {
    if (payload.type === 'models.snapshot' && payload.data) {
      const next = new Map<string, ServedModel>();
      for (const s of payload.data) {
        next.set(s.id, mergeState(this._models.get(s.id), s));
      }
      this._models = next;
    } else if (payload.model?.id) {
      const s = payload.model;
      if (payload.type === 'model.removed') {
        this._models.delete(s.id);
      } else {
        this._models.set(s.id, mergeState(this._models.get(s.id), s));
      }
    } else {
      return;
    }
    this._changed.emit();
    if (payload.model?.state === 'loaded' && !payload.model.context_size) {
      void this.refresh(); // the context size comes with /v1/models
    }
  }

  private _models = new Map<string, ServedModel>();
  private _changed = new Signal<this, void>(this);
  private _live = false;
  private _disposed = false;
  private _abort: AbortController | null = null;
}
