/**
 * The JupyterLab / Notebook 7 plugins: the superfluid widget models and views in the
 * ipywidgets registry (`@jupyter-widgets/base` is a shared singleton), and inline
 * completions from the local model, and the chat panel over the server's conversations.
 */

import { IJupyterWidgetRegistry } from '@jupyter-widgets/base';
import type { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';

import { chatPlugin } from './chat/plugin';
import { completionsPlugin } from './completions/plugin';
import { MODULE_NAME, MODULE_VERSION } from './contract';
import { ModelsViewModel, ModelsViewView } from './modelsView';
import { ResponseViewModel, ResponseViewView } from './responseView';
import { ConversationTreeModel, ConversationTreeView } from './treeView';

/** The widgets this extension provides, by the names the Python classes use. */
export const widgetExports = {
  ResponseViewModel,
  ResponseViewView,
  ConversationTreeModel,
  ConversationTreeView,
  ModelsViewModel,
  ModelsViewView
};

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-superfluid:widgets',
  description: 'Streaming response view, conversation tree and models widgets.',
  requires: [IJupyterWidgetRegistry],
  autoStart: true,
  activate: (_app: JupyterFrontEnd, registry: IJupyterWidgetRegistry): void => {
    registry.registerWidget({ name: MODULE_NAME, version: MODULE_VERSION, exports: widgetExports });
  }
};

export default [plugin, completionsPlugin, chatPlugin];
