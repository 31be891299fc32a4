/**
 * The status bar item: the chat's model and its state (downloading or loading with
 * its percentage, generating while an answer streams); a click opens the panel's
 * model picker.
 */

import { ReactWidget } from '@jupyterlab/apputils';
import * as React from 'react';

import type { ChatController } from './controller';
import { statusText } from './statusText';
import { useControllerSignals } from './useController';

function Status({ controller, onClick }: { controller: ChatController; onClick: () => void }): JSX.Element {
  useControllerSignals(controller);
  const id = controller.model.modelId;
  const model = controller.models.get(id);
  const busy = controller.model.busy;
  return (
    <span
      className="sf-chat-status"
      data-state={busy ? 'generating' : (model?.state ?? '')}
      title="The chat's model (click to pick another)"
      onClick={onClick}
    >
      {statusText(id, model, busy)}
    </span>
  );
}

/** The status bar widget. */
export class ChatStatus extends ReactWidget {
  constructor(
    private readonly controller: ChatController,
    private readonly onClick: () => void
  ) {
    super();
    this.addClass('jp-StatusBar-GroupItem');
    this.addClass('sf-chat-status-item');
  }

  render(): JSX.Element {
    return <Status controller={this.controller} onClick={this.onClick} />;
  }
}
