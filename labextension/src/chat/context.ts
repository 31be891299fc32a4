/**
 * A notebook as context for the model: cells (code, markdown, text outputs, errors
 * with their tracebacks) as one `input_text` message, marked so that the chat shows
 * it as a chip (again after a reload) and never as text. The context goes before the
 * question, and is the same text for the same cells, so a follow-up stays warm.
 *
 * A notebook larger than the budget is cut to fit: whole cells farthest from the
 * focus go first, then the middle of what is still too long; a note says so, to the
 * user and to the model. Pure.
 */

/** One output of a cell, reduced to text. */
export interface OutputText {
  kind: 'stream' | 'result' | 'error';
  text: string;
  /** For errors: the exception's name and value. */
  ename?: string;
  evalue?: string;
}

/** One cell, as the context needs it. */
export interface CellContext {
  id: string;
  index: number;
  kind: 'code' | 'markdown' | 'raw';
  source: string;
  executionCount: number | null;
  outputs: OutputText[];
}

/** What a context message says about itself (its first line). */
export interface ContextMarker {
  path: string;
  cells: string[];
  note: string;
}

/** The assembled context. */
export interface AssembledContext {
  text: string;
  marker: ContextMarker;
  /** The cells included, in notebook order. */
  included: string[];
  /** How many cells were left out to fit. */
  dropped: number;
  /** How many characters were cut from cells that stayed. */
  cutChars: number;
}

const ANSI = /\u001b\[[0-9;]*[A-Za-z]/g;
const OPEN = /^<notebook-context path="([^"]*)" cells="([^"]*)"(?: note="([^"]*)")?>\n/;
const CLOSE = '\n</notebook-context>';

/** Text without terminal colour codes (tracebacks carry them). */
export function stripAnsi(text: string): string {
  return text.replace(ANSI, '');
}

function escapeAttr(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
}

function unescapeAttr(text: string): string {
  return text.replace(/&lt;/g, '<').replace(/&quot;/g, '"').replace(/&amp;/g, '&');
}

/** One cell as the model reads it. */
export function formatCell(cell: CellContext, language = 'python'): string {
  const count = cell.executionCount === null ? '' : `, In [${cell.executionCount}]`;
  const head = `## Cell ${cell.index + 1} (${cell.kind}${count})`;
  const fence = cell.kind === 'code' ? language : cell.kind === 'markdown' ? 'markdown' : '';
  const parts = [head, '```' + fence + '\n' + cell.source + '\n```'];
  for (const out of cell.outputs) {
    if (out.kind === 'error') {
      parts.push(`Error: ${out.ename ?? 'Error'}: ${out.evalue ?? ''}\n\`\`\`\n${stripAnsi(out.text)}\n\`\`\``);
    } else if (out.text.trim()) {
      parts.push(`Output:\n\`\`\`\n${stripAnsi(out.text)}\n\`\`\``);
    }
  }
  return parts.join('\n');
}

/** Cut the middle of `text` down to `max` characters, saying how much went. */
export function cutMiddle(text: string, max: number): string {
  if (text.length <= max) {
    return text;
  }
  const keep = Math.max(0, max - 40);
  const head = text.slice(0, Math.ceil(keep / 2));
  const tail = text.slice(text.length - Math.floor(keep / 2));
  return `${head}\n… [${text.length - keep} characters cut] …\n${tail}`;
}

/** Cells ordered by how much they matter: the focus first, then nearest to it. */
export function byRelevance(cells: CellContext[], focusId: string | null): CellContext[] {
  const focus = cells.findIndex(c => c.id === focusId);
  const at = focus < 0 ? cells.length : focus; // no focus: the last cells matter most
  return [...cells].sort((a, b) => Math.abs(cells.indexOf(a) - at) - Math.abs(cells.indexOf(b) - at));
}

/** The context message's text for these cells, cut to `budget` characters. */
export function assembleContext(
  path: string,
  cells: CellContext[],
  budget: number,
  focusId: string | null = null,
  language = 'python'
): AssembledContext {
  const formatted = new Map(cells.map(c => [c.id, formatCell(c, language)] as [string, string]));
  const kept = new Set<string>();
  let used = 0;
  for (const cell of byRelevance(cells, focusId)) {
    const size = (formatted.get(cell.id) ?? '').length + 2;
    if (used + size <= budget || kept.size === 0) {
      kept.add(cell.id);
      used += size;
    }
  }
  const included = cells.filter(c => kept.has(c.id));
  const dropped = cells.length - included.length;
  let cutChars = 0;
  const bodies = included.map(c => formatted.get(c.id) ?? '');
  if (used > budget && bodies.length === 1) {
    const cut = cutMiddle(bodies[0], Math.max(200, budget));
    cutChars = bodies[0].length - cut.length;
    bodies[0] = cut;
  }
  const notes: string[] = [];
  if (dropped > 0) {
    notes.push(`${dropped} of ${cells.length} cells left out to fit the model's context`);
  }
  if (cutChars > 0) {
    notes.push(`${cutChars} characters cut to fit the model's context`);
  }
  const marker: ContextMarker = { path, cells: included.map(c => c.id), note: notes.join('; ') };
  const note = marker.note ? ` note="${escapeAttr(marker.note)}"` : '';
  const open = `<notebook-context path="${escapeAttr(path)}" cells="${marker.cells.join(',')}"${note}>\n`;
  const intro = `Notebook ${path}${marker.note ? ` (${marker.note})` : ''}:\n\n`;
  return { text: open + intro + bodies.join('\n\n') + CLOSE, marker, included: marker.cells, dropped, cutChars };
}

/** The marker of a context message, or null for any other text. */
export function parseContext(text: string): ContextMarker | null {
  const m = OPEN.exec(text);
  if (!m) {
    return null;
  }
  return {
    path: unescapeAttr(m[1]),
    cells: m[2] ? m[2].split(',') : [],
    note: m[3] ? unescapeAttr(m[3]) : ''
  };
}

/** Characters of context the model has room for: its window, less the answer and the chat. */
export function contextBudget(window: number, maxOutput: number, usedTokens: number, charsPerToken = 3): number {
  const free = window - maxOutput - usedTokens - 64;
  return Math.max(0, Math.floor(free * charsPerToken));
}

/** The chip's label for an attached context. */
export function contextLabel(marker: ContextMarker): string {
  const name = marker.path.split('/').pop() ?? marker.path;
  const n = marker.cells.length;
  return `${name} · ${n} cell${n === 1 ? '' : 's'}${marker.note ? ' (cut)' : ''}`;
}
