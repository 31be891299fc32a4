/**
 * The inline-completions plugin: registers the provider with JupyterLab's completion
 * manager and its failure note in the status bar (when there is one).
 */

import type { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICompletionProviderManager } from '@jupyterlab/completer';
import { IStatusBar } from '@jupyterlab/statusbar';

import { SuperfluidInlineProvider } from './provider';
import { CompletionStatus } from './status';

export const completionsPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-superfluid:inline-completions',
  description: 'Ghost-text completions in code cells from the local model.',
  requires: [ICompletionProviderManager],
  optional: [IStatusBar],
  autoStart: true,
  activate: (
    _app: JupyterFrontEnd,
    manager: ICompletionProviderManager,
    statusBar: IStatusBar | null
  ): void => {
    const status = new CompletionStatus();
    manager.registerInlineProvider(new SuperfluidInlineProvider(status));
    statusBar?.registerStatusItem('jupyter-superfluid:completion-status', {
      item: status,
      align: 'left',
      rank: 900,
      isActive: () => true
    });
  }
};
