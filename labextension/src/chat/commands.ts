/**
 * The chat's command ids, and the notebook commands: attach the active cell, the
 * selected cells or the whole notebook; "Explain this error" (cells with an error
 * output) and "Ask about this cell", which open the panel with that context.
 */

import type { JupyterFrontEnd } from '@jupyterlab/application';
import type { INotebookTracker } from '@jupyterlab/notebook';

import type { ChatController } from './controller';
import { attachmentFor, hasError, notebookCells, type Scope } from './notebook';

export const CommandIds = {
  open: 'superfluid-chat:open',
  newChat: 'superfluid-chat:new',
  pickModel: 'superfluid-chat:pick-model',
  attachCell: 'superfluid-chat:attach-cell',
  attachSelection: 'superfluid-chat:attach-selection',
  attachNotebook: 'superfluid-chat:attach-notebook',
  explainError: 'superfluid-chat:explain-error',
  askCell: 'superfluid-chat:ask-cell'
} as const;

export const CATEGORY = 'Superfluid';

/** The cell a command is about: the one right-clicked for its context menu, else the active one. */
function targetIndex(app: JupyterFrontEnd, tracker: INotebookTracker): number {
  const panel = tracker.currentWidget;
  if (!panel) {
    return -1;
  }
  const node = app.contextMenuHitTest(n => n.classList.contains('jp-Cell'));
  const hit = node ? panel.content.widgets.findIndex(cell => cell.node === node) : -1;
  return hit >= 0 ? hit : panel.content.activeCellIndex;
}

/** Make the command's cell the active one (a right-click does not always). */
function activateTarget(app: JupyterFrontEnd, tracker: INotebookTracker): void {
  const panel = tracker.currentWidget;
  const index = targetIndex(app, tracker);
  if (panel && index >= 0 && index !== panel.content.activeCellIndex) {
    panel.content.activeCellIndex = index;
  }
}

/** Whether the command's cell has an error output. */
function targetHasError(app: JupyterFrontEnd, tracker: INotebookTracker): boolean {
  const panel = tracker.currentWidget;
  if (!panel) {
    return false;
  }
  return hasError(notebookCells(panel)[targetIndex(app, tracker)]);
}

/** The notebook commands, with their context-menu entries. */
export function addNotebookCommands(
  app: JupyterFrontEnd,
  tracker: INotebookTracker,
  controller: ChatController,
  open: () => void
): void {
  const attach = (scope: Scope): boolean => {
    const attachment = attachmentFor(tracker, scope);
    if (!attachment) {
      return false;
    }
    open();
    controller.model.input.addAttachment?.(attachment);
    controller.model.input.focus();
    return true;
  };
  const enabled = () => tracker.currentWidget !== null;
  const scopes: [string, Scope, string][] = [
    [CommandIds.attachCell, 'active', 'Attach the active cell to the chat'],
    [CommandIds.attachSelection, 'selected', 'Attach the selected cells to the chat'],
    [CommandIds.attachNotebook, 'notebook', 'Attach the whole notebook to the chat']
  ];
  for (const [id, scope, label] of scopes) {
    app.commands.addCommand(id, { label, isEnabled: enabled, execute: () => attach(scope) });
  }
  app.commands.addCommand(CommandIds.explainError, {
    label: 'Explain this error',
    caption: 'Ask the chat to explain the error of this cell',
    isVisible: () => targetHasError(app, tracker),
    isEnabled: () => targetHasError(app, tracker),
    execute: async () => {
      activateTarget(app, tracker);
      const attachment = attachmentFor(tracker, 'active');
      if (!attachment) {
        return;
      }
      open();
      await controller.model.ask('Explain this error, and how to fix it.', [attachment]);
    }
  });
  app.commands.addCommand(CommandIds.askCell, {
    label: 'Ask about this cell',
    caption: 'Open the chat with this cell attached',
    isEnabled: enabled,
    execute: () => {
      activateTarget(app, tracker);
      return attach('active');
    }
  });
  const selector = '.jp-Notebook .jp-Cell';
  let rank = 60;
  for (const command of [CommandIds.explainError, CommandIds.askCell, CommandIds.attachSelection, CommandIds.attachNotebook]) {
    app.contextMenu.addItem({ command, selector, rank: rank++ });
  }
}
