/**
 * What the panel adds to `@jupyter/chat`'s messages: above an answer, its reasoning
 * (collapsed) and function calls, and a note where context was cut; below it, retry
 * (regenerate, a new branch), copy and the model with its cached tokens; in the
 * input's toolbar, a stop button that aborts the stream.
 */

import type { InputToolbarRegistry, MessageFooterSectionProps, MessagePreambleProps } from '@jupyter/chat';
import * as React from 'react';

import type { CallView } from './events';
import type { SuperfluidChatModel } from './model';

function useChanged(model: SuperfluidChatModel): void {
  const [, setTick] = React.useState(0);
  React.useEffect(() => {
    const bump = () => setTick(t => t + 1);
    model.stateChanged.connect(bump);
    return () => {
      model.stateChanged.disconnect(bump);
    };
  }, [model]);
}

function Call({ call, onDecide }: { call: CallView; onDecide?: (id: string, ok: boolean) => void }): JSX.Element {
  return (
    <details className="sf-chat-call" data-state={call.state ?? ''} open={call.state === 'pending'}>
      <summary>
        <code>{call.name}</code>({call.arguments.length > 60 ? call.arguments.slice(0, 57) + '…' : call.arguments})
        {call.state ? <span className="sf-chat-call-state"> · {call.state}</span> : null}
      </summary>
      <pre className="sf-chat-call-args">{call.arguments}</pre>
      {call.output !== undefined ? <pre className="sf-chat-call-output">{call.output}</pre> : null}
      {call.state === 'pending' && onDecide ? (
        <div className="sf-chat-call-approve">
          <button className="jp-Button jp-mod-styled jp-mod-accept sf-chat-call-run" onClick={() => onDecide(call.callId, true)}>
            Run in kernel
          </button>
          <button className="jp-Button jp-mod-styled jp-mod-reject sf-chat-call-decline" onClick={() => onDecide(call.callId, false)}>
            Decline
          </button>
        </div>
      ) : null}
    </details>
  );
}

/** The preamble factory: reasoning, calls and notes of a message. */
export function preamble(model: SuperfluidChatModel, decide: (id: string, ok: boolean) => void) {
  return function Preamble(props: MessagePreambleProps): JSX.Element | null {
    // Redrawn on every state change, as the footer is: a stop changes the status but not
    // the body, and the message's own re-render follows only its body.
    useChanged(model);
    const info = props.message.metadata?.superfluid;
    if (!info) {
      return null;
    }
    const notes = (info.contexts ?? []).filter(c => c.note).map(c => `${c.path}: ${c.note}`);
    if (info.role === 'user') {
      return (
        <div className="sf-chat-user-info" data-turn={info.turn}>
          {notes.length ? <div className="sf-chat-note sf-chat-context-cut">{notes.join('; ')}</div> : null}
        </div>
      );
    }
    const calls = info.calls ?? [];
    return (
      <div className="sf-chat-preamble" data-status={info.status ?? ''}>
        {info.reasoning ? (
          <details className="sf-chat-reasoning">
            <summary>Reasoning{info.status === 'in_progress' && !props.message.body ? '…' : ''}</summary>
            <div className="sf-chat-reasoning-text">{info.reasoning}</div>
          </details>
        ) : null}
        {calls.map(call => (
          <Call key={call.itemId} call={call} onDecide={decide} />
        ))}
      </div>
    );
  };
}

/** The footer factory: retry and copy on answers, and what answered. */
export function footer(model: SuperfluidChatModel) {
  return function Footer(props: MessageFooterSectionProps): JSX.Element | null {
    useChanged(model);
    const info = props.message.metadata?.superfluid;
    if (!info || info.role !== 'assistant') {
      return null;
    }
    const body = typeof props.message.body === 'string' ? props.message.body : '';
    const done = info.status !== 'in_progress';
    const cached = info.cachedTokens ? ` · ${info.cachedTokens} cached` : '';
    return (
      <div className="sf-chat-footer" data-response-id={info.responseId ?? ''} data-status={info.status ?? ''}>
        {/* In the footer, which follows every state change (the preamble follows the body). */}
        {info.status === 'stopped' ? <div className="sf-chat-note sf-chat-stopped">Stopped: this answer was not stored.</div> : null}
        <button
          className="jp-Button jp-mod-minimal sf-chat-retry"
          title="Regenerate this answer (a new branch)"
          disabled={!done || model.busy}
          onClick={() => void model.regenerate(info.turn)}
        >
          ↻ Retry
        </button>
        <button
          className="jp-Button jp-mod-minimal sf-chat-copy"
          title="Copy the answer's Markdown"
          disabled={!body}
          onClick={() => void navigator.clipboard?.writeText(body)}
        >
          Copy
        </button>
        <span className="sf-chat-meta">
          {info.model ?? ''}
          {cached}
        </span>
      </div>
    );
  };
}

/** The stop button of the input's toolbar (enabled while an answer streams). */
export function stopButton(model: SuperfluidChatModel): InputToolbarRegistry.IToolbarItem {
  function Stop(): JSX.Element {
    useChanged(model);
    return (
      <button
        className="jp-Button jp-mod-minimal sf-chat-stop"
        title="Stop generating (nothing is stored)"
        aria-label="Stop generating"
        disabled={!model.busy}
        onClick={() => model.stop()}
      >
        ■
      </button>
    );
  }
  return { element: Stop, position: 90 };
}
