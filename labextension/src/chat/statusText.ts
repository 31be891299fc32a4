/**
 * The status bar item's words: the chat's model and its state (with the download's
 * percentage), or `generating` while an answer streams. Pure.
 */

import { stateLabel } from '../progress';
import type { ServedModel } from './types';

/** The item's text: `model · state`, with progress where there is some. */
export function statusText(modelId: string, model: ServedModel | undefined, generating: boolean): string {
  if (!modelId) {
    return 'Superfluid: no model';
  }
  if (generating) {
    return `${modelId} · generating`;
  }
  const state = model ? stateLabel(model.state) : 'unknown';
  const fraction = model?.progress?.fraction;
  const percent = model?.state === 'downloading' && typeof fraction === 'number' ? ` ${Math.floor(fraction * 100)}%` : '';
  return `${modelId} · ${state}${percent}`;
}
