/**
 * The prompt of an inline completion: the notebook's earlier cells, then the current
 * cell up to the cursor, with the rest of the cell as the fill-in-the-middle suffix.
 *
 * The earlier cells come first and change only when the user edits them, so while the
 * user types in one cell the prompt grows at its end and the server's prefix cache
 * keeps everything before the cursor evaluated. Cutting to fit also keeps that
 * prefix stable: whole cells are dropped from the start, never characters.
 */

/** One cell of the notebook, as the prompt needs it. */
export interface CellText {
  kind: 'code' | 'markdown' | 'raw';
  source: string;
}

/** How the prompt is bounded. */
export interface PromptLimits {
  /** At most this many characters of earlier cells (whole cells are dropped first). */
  contextChars: number;
  /** A markdown cell contributes at most this many lines, as comments. */
  markdownLines: number;
}

export const DEFAULT_LIMITS: PromptLimits = { contextChars: 8000, markdownLines: 3 };

/** A completion request's prompt: what goes before the cursor and what after. */
export interface CompletionPrompt {
  prompt: string;
  suffix: string;
}

const CELL_BREAK = '\n\n';

/** A markdown cell as a few comment lines (briefly: the code is what completes). */
export function markdownAsComment(source: string, maxLines: number): string {
  const lines = source
    .split('\n')
    .map(line => line.trim().replace(/^#+\s*/, ''))
    .filter(line => line.length > 0)
    .slice(0, maxLines);
  return lines.map(line => `# ${line}`).join('\n');
}

/** The text an earlier cell contributes, or null when it contributes nothing. */
export function cellContext(cell: CellText, limits: PromptLimits): string | null {
  if (cell.kind === 'code') {
    return cell.source.trim().length > 0 ? cell.source.replace(/\s+$/, '') : null;
  }
  if (cell.kind === 'markdown') {
    const comment = markdownAsComment(cell.source, limits.markdownLines);
    return comment.length > 0 ? comment : null;
  }
  return null;
}

/** The earlier cells as one block, newest kept when they do not all fit. */
export function earlierCells(cells: readonly CellText[], limits: PromptLimits): string {
  const parts = cells
    .map(cell => cellContext(cell, limits))
    .filter((part): part is string => part !== null);
  let total = 0;
  let first = parts.length;
  while (first > 0) {
    const next = total + parts[first - 1].length + CELL_BREAK.length;
    if (next > limits.contextChars) {
      break;
    }
    total = next;
    first -= 1;
  }
  return parts
    .slice(first)
    .map(part => part + CELL_BREAK)
    .join('');
}

/** The prompt for completing `text` at `offset`, after the notebook's `before` cells. */
export function buildPrompt(
  before: readonly CellText[],
  text: string,
  offset: number,
  limits: PromptLimits = DEFAULT_LIMITS
): CompletionPrompt {
  const cursor = Math.max(0, Math.min(offset, text.length));
  return {
    prompt: earlierCells(before, limits) + text.slice(0, cursor),
    suffix: text.slice(cursor)
  };
}

/** A completion cut to one line (single-line mode), or left whole. */
export function fitLines(completion: string, multiline: boolean): string {
  if (multiline) {
    return completion;
  }
  const end = completion.indexOf('\n');
  return end === -1 ? completion : completion.slice(0, end);
}
