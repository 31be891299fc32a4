/**
 * The panel's header, above the messages: the chat list (search, new, rename,
 * delete: newest first), the model picker with the picked model's progress bar,
 * and the conversation's branch tree (laid out by `treeLayout.ts`; a click shows
 * that branch).
 */

import { ReactWidget } from '@jupyterlab/apputils';
import * as React from 'react';

import type { ModelRow, TreeNode } from '../contract';
import { progressBar, stateLabel } from '../progress';
import { layoutRows } from '../treeLayout';
import type { ChatController } from './controller';
import { chatTitle, filterChats, lastActive, relativeTime } from './titles';
import type { ServedModel } from './types';
import { useControllerSignals } from './useController';

function ChatRow({ controller, id }: { controller: ChatController; id: string }): JSX.Element | null {
  const conv = controller.chats.find(c => c.id === id);
  const [renaming, setRenaming] = React.useState(false);
  const [confirm, setConfirm] = React.useState(false);
  const [draft, setDraft] = React.useState('');
  if (!conv) {
    return null;
  }
  const title = chatTitle(conv);
  const current = controller.model.conversation?.id === id;
  if (renaming) {
    const done = (save: boolean) => {
      setRenaming(false);
      if (save && draft.trim()) {
        void controller.rename(id, draft);
      }
    };
    return (
      <li className="sf-chat-item" data-id={id} data-current={String(current)}>
        <input
          className="jp-mod-styled sf-chat-rename-input"
          autoFocus
          value={draft}
          aria-label="New title"
          onChange={e => setDraft(e.target.value)}
          onKeyDown={e => (e.key === 'Enter' ? done(true) : e.key === 'Escape' ? done(false) : undefined)}
          onBlur={() => done(true)}
        />
      </li>
    );
  }
  return (
    <li className="sf-chat-item" data-id={id} data-current={String(current)}>
      <button className="sf-chat-open" title={title} onClick={() => void controller.open(id)}>
        <span className="sf-chat-title">{title}</span>
        <span className="sf-chat-time">{relativeTime(lastActive(conv))}</span>
      </button>
      <button
        className="jp-Button jp-mod-minimal sf-chat-rename"
        title="Rename"
        aria-label={`Rename ${title}`}
        onClick={() => {
          setDraft(title);
          setRenaming(true);
        }}
      >
        ✎
      </button>
      <button
        className={`jp-Button jp-mod-minimal sf-chat-delete${confirm ? ' sf-chat-confirm' : ''}`}
        title={confirm ? 'Click again to delete it and every answer it holds' : 'Delete'}
        aria-label={`Delete ${title}`}
        onClick={() => (confirm ? void controller.remove(id) : setConfirm(true))}
        onBlur={() => setConfirm(false)}
      >
        {confirm ? 'Delete?' : '✕'}
      </button>
    </li>
  );
}

function ChatList({ controller }: { controller: ChatController }): JSX.Element {
  const shown = filterChats(controller.chats, controller.query);
  return (
    <div className="sf-chat-list-box">
      <div className="sf-chat-list-bar">
        <input
          className="jp-mod-styled sf-chat-search"
          type="search"
          placeholder="Search chats"
          aria-label="Search chats"
          value={controller.query}
          onChange={e => controller.search(e.target.value)}
        />
        <button className="jp-Button jp-mod-styled jp-mod-accept sf-chat-new" onClick={() => void controller.newChat()}>
          + New chat
        </button>
      </div>
      <ul className="sf-chat-list" aria-label="Chats">
        {shown.map(c => (
          <ChatRow key={c.id} controller={controller} id={c.id} />
        ))}
        {shown.length === 0 ? <li className="sf-chat-empty">{controller.query ? 'No chat matches.' : 'No chats yet.'}</li> : null}
      </ul>
    </div>
  );
}

function Bar({ model }: { model: ServedModel }): JSX.Element | null {
  const shown = progressBar({
    ...model,
    state: model.state as ModelRow['state'],
    progress: model.progress ? { ...model.progress, file: model.progress.file ?? '' } : null,
    spec: '',
    kind: '',
    origin: 'config',
    since: 0
  });
  if (!shown) {
    return null;
  }
  const percent = shown.fraction === null ? null : Math.floor(shown.fraction * 100);
  return (
    <div className="sf-chat-progress">
      <div
        className={`sf-bar${percent === null ? ' sf-bar-indeterminate' : ''}`}
        role="progressbar"
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={percent ?? undefined}
        aria-valuetext={shown.text}
      >
        <div className="sf-bar-fill" style={percent === null ? {} : { width: `${percent}%` }} />
      </div>
      <span className="sf-chat-progress-text">{model.progress?.text ?? shown.text}</span>
    </div>
  );
}

function ModelPicker({ controller, focus }: { controller: ChatController; focus: number }): JSX.Element {
  const ref = React.useRef<HTMLSelectElement>(null);
  React.useEffect(() => {
    if (focus) {
      ref.current?.focus();
    }
  }, [focus]);
  const picked = controller.model.modelId;
  const models = controller.models.models;
  const current = controller.models.get(picked);
  return (
    <div className="sf-chat-model" data-state={current?.state ?? ''}>
      <label className="sf-chat-model-label">
        Model
        <select
          ref={ref}
          className="jp-mod-styled sf-chat-model-select"
          value={picked}
          onChange={e => void controller.pickModel(e.target.value)}
        >
          {picked && !current ? <option value={picked}>{picked}</option> : null}
          {models.map(m => (
            <option key={m.id} value={m.id} data-state={m.state}>
              {m.id} ({stateLabel(m.state)})
            </option>
          ))}
        </select>
      </label>
      {current?.state === 'failed' ? <div className="sf-chat-note sf-chat-model-error">{current.error}</div> : null}
      {current ? <Bar model={current} /> : null}
    </div>
  );
}

function Tree({ controller }: { controller: ChatController }): JSX.Element | null {
  const model = controller.model;
  const nodes: TreeNode[] = model.nodes.map(n => ({
    id: n.id,
    created_at: n.created_at,
    model: n.model ?? '',
    status: n.status ?? '',
    previous_response_id: n.previous_response_id,
    cached_tokens: 0,
    preview: n.preview ?? ''
  }));
  if (nodes.length === 0) {
    return null;
  }
  const rows = layoutRows(nodes, model.head ?? '');
  const branches = rows.filter(r => r.isLeaf).length;
  return (
    <details className="sf-chat-tree" open={branches > 1}>
      <summary>
        Branches <span className="sf-chat-branch-count">{branches}</span>
      </summary>
      <ul className="sf-chat-tree-rows" role="tree">
        {rows.map(row => (
          <li
            key={row.id}
            role="treeitem"
            aria-selected={row.isCurrent}
            className={`sf-chat-tree-node${row.onPath ? ' sf-on-path' : ''}`}
            data-id={row.id}
            data-current={String(row.isCurrent)}
            data-leaf={String(row.isLeaf)}
            title={row.node?.preview ?? ''}
            onClick={() => void model.switchBranch(row.id)}
          >
            <span className="sf-chat-tree-guides">{row.guides}</span>
            <span className="sf-chat-tree-preview">{row.node?.preview || row.id}</span>
          </li>
        ))}
      </ul>
    </details>
  );
}

function Header({ controller }: { controller: ChatController }): JSX.Element {
  useControllerSignals(controller);
  const [focus, setFocus] = React.useState(0);
  React.useEffect(() => {
    const request = () => setFocus(f => f + 1);
    controller.pickerRequested.connect(request);
    return () => {
      controller.pickerRequested.disconnect(request);
    };
  }, [controller]);
  const error = controller.error || controller.model.error;
  return (
    <div className="sf-chat-header" data-busy={String(controller.model.busy)}>
      <ChatList controller={controller} />
      <ModelPicker controller={controller} focus={focus} />
      <Tree controller={controller} />
      {error ? <div className="sf-chat-note sf-chat-error" role="alert">{error}</div> : null}
    </div>
  );
}

/** The header as a Lumino widget. */
export class ChatHeader extends ReactWidget {
  constructor(private readonly controller: ChatController) {
    super();
    this.addClass('sf-chat-header-widget');
  }

  render(): JSX.Element {
    return <Header controller={this.controller} />;
  }
}
