/**
 * The status-bar note of the completer: empty while completions work, a short
 * message when the model failed (never anything in the editor itself).
 */

import { Widget } from '@lumino/widgets';

/** A status-bar item that shows the completer's last failure, if any. */
export class CompletionStatus extends Widget {
  constructor() {
    super();
    this.addClass('jp-superfluid-completion-status');
    this.node.title = 'Inline completions from the local model (jupyter_superfluid)';
  }

  /** Completions work again: the note goes away. */
  ok(): void {
    this.node.textContent = '';
    this.node.dataset.state = 'ok';
  }

  /** A completion failed: say why, briefly. */
  failed(message: string): void {
    this.node.textContent = `Completions: ${message}`;
    this.node.dataset.state = 'failed';
  }
}
