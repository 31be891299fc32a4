/**
 * The chat plugin: the panel in the left area (its icon, the palette's
 * "Superfluid: Open chat", Alt Shift C), its settings from the settings registry,
 * the status bar item, the notebook context commands, and the kernel's functions
 * as tools when enabled.
 */

import { ActiveCellManager } from '@jupyter/chat';
import { ILayoutRestorer, type JupyterFrontEnd, type JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, IThemeManager } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';

import { ChatApi } from './api';
import { addNotebookCommands, CATEGORY, CommandIds } from './commands';
import { ChatController } from './controller';
import { SuperfluidChatModel } from './model';
import { ModelsStore } from './models';
import { notebookContext } from './notebook';
import { chatIcon, createPanel, PANEL_ID } from './panel';
import { ChatStatus } from './status';
import { KernelTools } from './tools';
import { DEFAULT_SETTINGS, readSettings, type ChatSettings } from './types';

export const CHAT_PLUGIN_ID = 'jupyter-superfluid:chat';

export const chatPlugin: JupyterFrontEndPlugin<void> = {
  id: CHAT_PLUGIN_ID,
  description: 'A chat panel over this server’s durable, forkable conversations.',
  requires: [IRenderMimeRegistry],
  optional: [ICommandPalette, ILayoutRestorer, ISettingRegistry, INotebookTracker, IStatusBar, IThemeManager],
  autoStart: true,
  activate: (
    app: JupyterFrontEnd,
    rendermime: IRenderMimeRegistry,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null,
    registry: ISettingRegistry | null,
    tracker: INotebookTracker | null,
    statusBar: IStatusBar | null,
    themeManager: IThemeManager | null
  ): void => {
    let settings: ChatSettings = { ...DEFAULT_SETTINGS };
    const current = () => settings;
    const api = new ChatApi();
    const models = new ModelsStore(api);
    const activeCellManager = tracker ? new ActiveCellManager({ tracker, shell: app.shell }) : null;
    const model = new SuperfluidChatModel({ api, settings: current, commands: app.commands, activeCellManager });
    const controller = new ChatController(api, model, models, current);
    const tools = tracker ? new KernelTools(tracker, current) : null;
    if (tracker) {
      model.contextProvider = notebookContext(tracker, api, models, current);
    }
    if (tools) {
      model.tools = () => tools.specs();
      model.toolRunner = (calls, update) => tools.run(calls, update);
    }
    const panel = createPanel(controller, rendermime, themeManager, (id, ok) => tools?.decide(id, ok));
    app.shell.add(panel, 'left', { rank: 1000 });
    restorer?.add(panel, PANEL_ID);

    const open = () => {
      app.shell.activateById(PANEL_ID);
    };
    app.commands.addCommand(CommandIds.open, {
      label: 'Superfluid: Open chat',
      caption: 'Open the chat panel over this server’s conversations',
      icon: chatIcon,
      execute: () => {
        open();
        model.input.focus();
      }
    });
    app.commands.addCommand(CommandIds.newChat, {
      label: 'Superfluid: New chat',
      execute: async () => {
        open();
        await controller.newChat();
      }
    });
    app.commands.addCommand(CommandIds.pickModel, {
      label: 'Superfluid: Pick the chat model',
      execute: () => {
        open();
        controller.requestPicker();
      }
    });
    for (const command of [CommandIds.open, CommandIds.newChat, CommandIds.pickModel]) {
      palette?.addItem({ command, category: CATEGORY });
    }
    if (tracker) {
      addNotebookCommands(app, tracker, controller, open);
      tracker.currentChanged.connect(() => tools?.refresh());
    }
    statusBar?.registerStatusItem('jupyter-superfluid:chat-status', {
      item: new ChatStatus(controller, () => void app.commands.execute(CommandIds.pickModel)),
      align: 'left',
      rank: 950,
      isActive: () => true
    });

    const started = (async () => {
      if (registry) {
        try {
          const loaded = await registry.load(CHAT_PLUGIN_ID);
          const apply = () => {
            settings = readSettings(loaded.composite as Record<string, unknown>);
            if (settings.defaultModel && !model.conversation && !model.messages.length) {
              model.modelId = settings.defaultModel;
            }
          };
          apply();
          loaded.changed.connect(apply);
        } catch (err) {
          console.warn('superfluid chat: settings not loaded', err);
        }
      }
      await models.start();
      await controller.start();
    })();
    started.catch(err => console.error('superfluid chat: start failed', err));
  }
};
