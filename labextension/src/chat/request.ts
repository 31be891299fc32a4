/**
 * The `POST v1/responses` body of one round of a chat turn, from the panel's settings.
 */

import type { ResponseBody } from './api';
import type { ChatSettings, ConversationItem } from './types';

/** Where a round starts: undefined continues the head, null a new branch from the root,
 * an id forks at that response. */
export type ForkFrom = string | null | undefined;

/** The request of one round. The tool choice setting holds for a turn's first round only
 * (as the Agents SDK resets it), so a required call cannot loop. */
export function requestBody(
  settings: ChatSettings,
  round: { model: string; conversation: string; input: ConversationItem[]; forkFrom: ForkFrom; first: boolean },
  tools: unknown[]
): ResponseBody {
  const { model, conversation, input, forkFrom, first } = round;
  const body: ResponseBody = { model, input, conversation };
  if (forkFrom === null) {
    body.branch_from_root = true;
  } else if (forkFrom !== undefined) {
    body.previous_response_id = forkFrom;
  }
  if (settings.instructions.trim()) {
    body.instructions = settings.instructions;
  }
  if (settings.temperature !== null) {
    body.temperature = settings.temperature;
  }
  if (settings.maxOutputTokens !== null) {
    body.max_output_tokens = settings.maxOutputTokens;
  }
  if (settings.reasoningEffort !== null) {
    body.reasoning = { effort: settings.reasoningEffort };
  }
  if (tools.length) {
    body.tools = tools;
    if (first && settings.toolChoice !== 'auto') {
      body.tool_choice = settings.toolChoice;
    }
  }
  return body;
}
