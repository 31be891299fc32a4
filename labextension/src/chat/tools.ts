/**
 * The active notebook kernel's functions as function tools, as `%%respond --tools`
 * does: their specs come from `jupyter_superfluid.notebook.tools` run in the kernel,
 * and each call the model makes waits for the user's approval (Run / Decline in the
 * answer) before it runs in that kernel, unless auto-approval is on.
 */

import type { INotebookTracker } from '@jupyterlab/notebook';
import type { KernelMessage } from '@jupyterlab/services';

import type { CallView } from './events';
import type { ChatSettings, ConversationItem } from './types';

/** How long a message waits for the kernel to list its functions. */
const SPECS_WAIT_MS = 1000;

const SPECS = `def _sf_specs():
    import json, types
    from jupyter_superfluid.notebook.tools import function_tool
    out = []
    for k, v in list(globals().items()):
        if isinstance(v, types.FunctionType) and not k.startswith('_') and v.__module__ == '__main__':
            try:
                out.append(function_tool(v, k).spec)
            except Exception:
                pass
    print(json.dumps(out))
_sf_specs(); del _sf_specs`;

/** The Python that runs one call (name and arguments as JSON string literals). */
export function callCode(name: string, args: string): string {
  return `def _sf_call():
    from jupyter_superfluid.notebook.tools import call_tool, function_tool
    name = ${JSON.stringify(name)}
    fn = globals().get(name)
    print(call_tool(function_tool(fn, name), ${JSON.stringify(args)}) if callable(fn) else f"no function {name!r} in the kernel")
_sf_call(); del _sf_call`;
}

export class KernelTools {
  constructor(
    private readonly tracker: INotebookTracker,
    private readonly settings: () => ChatSettings
  ) {}

  /** The tools offered with the next request (none unless enabled): the kernel's
   * functions now, or the last ones read if the kernel is busy for longer than
   * `SPECS_WAIT_MS` (a running cell must not hold the chat up). */
  async specs(): Promise<unknown[]> {
    if (!this.settings().offerKernelTools) {
      return [];
    }
    const waited = new Promise<void>(resolve => setTimeout(resolve, SPECS_WAIT_MS));
    await Promise.race([this.refresh(), waited]);
    return this._specs;
  }

  /** Read the kernel's functions again. */
  async refresh(): Promise<void> {
    if (!this.settings().offerKernelTools) {
      return;
    }
    try {
      const out = await this.execute(SPECS);
      this._specs = JSON.parse(out.trim().split('\n').pop() || '[]');
    } catch {
      this._specs = [];
    }
  }

  /** Approve or decline a pending call. */
  decide(callId: string, ok: boolean): void {
    this._waiting.get(callId)?.(ok);
    this._waiting.delete(callId);
  }

  /** Run the answer's calls (each approved first); their outputs, or null when none ran. */
  async run(calls: CallView[], update: () => void): Promise<ConversationItem[] | null> {
    const outputs: ConversationItem[] = [];
    for (const call of calls.filter(c => c.output === undefined)) {
      let ok = this.settings().autoApproveTools;
      if (!ok) {
        call.state = 'pending';
        update();
        ok = await new Promise<boolean>(resolve => this._waiting.set(call.callId, resolve));
      }
      if (ok) {
        call.state = 'running';
        update();
        try {
          call.output = (await this.execute(callCode(call.name, call.arguments))).replace(/\n$/, '');
        } catch (err) {
          call.output = `the kernel failed: ${(err as Error).message}`;
        }
        call.state = 'done';
      } else {
        call.output = 'the user declined this call';
        call.state = 'declined';
      }
      update();
      outputs.push({ type: 'function_call_output', call_id: call.callId, output: call.output });
    }
    return outputs.length ? outputs : null;
  }

  private async execute(code: string): Promise<string> {
    const kernel = this.tracker.currentWidget?.sessionContext.session?.kernel;
    if (!kernel) {
      throw new Error('no kernel');
    }
    const future = kernel.requestExecute({ code, silent: false, store_history: false });
    let out = '';
    future.onIOPub = (msg: { header: { msg_type: string }; content: unknown }) => {
      if (msg.header.msg_type === 'stream') {
        out += (msg.content as KernelMessage.IStreamMsg['content']).text;
      } else if (msg.header.msg_type === 'error') {
        const content = msg.content as KernelMessage.IErrorMsg['content'];
        out += `${content.ename}: ${content.evalue}`;
      }
    };
    await future.done;
    return out;
  }

  private _specs: unknown[] = [];
  private _waiting = new Map<string, (ok: boolean) => void>();
}
