/**
 * The chat panel of the side area: the header (chats, model, branches) above
 * `@jupyter/chat`'s chat widget, with this panel's preamble, footer and stop button
 * in its registries.
 */

import {
  ChatWidget,
  InputToolbarRegistry,
  MessageFooterRegistry,
  MessagePreambleRegistry
} from '@jupyter/chat';
import type { IThemeManager } from '@jupyterlab/apputils';
import type { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { LabIcon } from '@jupyterlab/ui-components';
import type { Message } from '@lumino/messaging';
import { Panel } from '@lumino/widgets';

import { footer, preamble, stopButton } from './components';
import type { ChatController } from './controller';
import { ChatHeader } from './header';

const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><path class="jp-icon3" fill="#616161" d="M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2zm3 5v2h10V9H7zm0 4v2h7v-2H7z"/></svg>`;

export const chatIcon = new LabIcon({ name: 'jupyter-superfluid:chat', svgstr: ICON_SVG });

export const PANEL_ID = 'jupyter-superfluid-chat';

/** The side panel; each time it is shown, the chats are listed again, so those made
 * elsewhere (another tab, Jupyter AI's chat, the API) are there. */
class ChatPanel extends Panel {
  constructor(private readonly controller: ChatController) {
    super();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    void this.controller.refresh();
  }
}

/** The panel. */
export function createPanel(
  controller: ChatController,
  rmRegistry: IRenderMimeRegistry,
  themeManager: IThemeManager | null,
  decide: (callId: string, ok: boolean) => void
): Panel {
  const toolbar = InputToolbarRegistry.defaultToolbarRegistry();
  toolbar.addItem('stop', stopButton(controller.model));
  toolbar.hide('attach'); // file attachments: this panel attaches notebook cells
  const footers = new MessageFooterRegistry();
  footers.addSection({ component: footer(controller.model), position: 'left' });
  const preambles = new MessagePreambleRegistry();
  preambles.addComponent(preamble(controller.model, decide));
  const chat = new ChatWidget({
    model: controller.model,
    rmRegistry,
    themeManager,
    inputToolbarRegistry: toolbar,
    messageFooterRegistry: footers,
    messagePreambleRegistry: preambles,
    area: 'sidebar'
  });
  chat.addClass('sf-chat-body');
  const panel = new ChatPanel(controller);
  panel.id = PANEL_ID;
  panel.addClass('sf-chat-panel');
  panel.title.icon = chatIcon;
  panel.title.caption = 'Superfluid chat';
  panel.addWidget(new ChatHeader(controller));
  panel.addWidget(chat);
  return panel;
}
