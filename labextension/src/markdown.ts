/**
 * A tiny, safe Markdown renderer for streamed model text.
 *
 * Every character of the source is HTML-escaped before any markup is added, so model
 * output can never inject HTML; links keep only http(s) and mailto targets. It covers
 * what chat models write: paragraphs, headings, fenced code (also while the fence is
 * still open during streaming), lists, block quotes, rules, inline code, bold,
 * italics and links. Pure functions only: unit-tested without a DOM.
 */

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;'
};

/** Escape text for use in HTML content and quoted attributes. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, ch => ESCAPES[ch]);
}

const SAFE_URL = /^(https?:\/\/|mailto:)/i;

/** Links in escaped text, swapped for placeholders so that emphasis leaves them alone. */
function takeLinks(escaped: string, links: string[]): string {
  return escaped.replace(/\[([^\]]+)\]\(([^)\s]+)\)/g, (_whole, label: string, url: string) => {
    const raw = url.replace(/&amp;/g, '&');
    const html = SAFE_URL.test(raw)
      ? `<a href="${url}" target="_blank" rel="noopener noreferrer">${emphasis(label)}</a>`
      : emphasis(label);
    links.push(html);
    return `\u0000${links.length - 1}\u0000`;
  });
}

/** Bold and italics in already-escaped text. */
function emphasis(escaped: string): string {
  return escaped
    .replace(/\*\*(?=\S)([^*]*?\S)\*\*/g, '<strong>$1</strong>')
    .replace(/__(?=\S)([^_]*?\S)__/g, '<strong>$1</strong>')
    .replace(/(^|[^*\w])\*(?=\S)([^*]*?\S)\*(?!\w)/g, '$1<em>$2</em>')
    .replace(/(^|[^_\w])_(?=\S)([^_]*?\S)_(?!\w)/g, '$1<em>$2</em>');
}

/** Links, bold and italics in escaped text without code spans. */
function inlineMarkup(escaped: string): string {
  const links: string[] = [];
  const marked = emphasis(takeLinks(escaped, links));
  return marked.replace(/\u0000(\d+)\u0000/g, (_m, n: string) => links[Number(n)]);
}

/** Render one line of inline Markdown (code spans first, so their text stays literal). */
export function renderInline(text: string): string {
  const parts = text.split(/(`+[^`]*?`+)/g);
  return parts
    .map(part => {
      const code = /^(`+)([^`]*?)\1$/.exec(part);
      if (code && part.length > 1) {
        return `<code>${escapeHtml(code[2])}</code>`;
      }
      return inlineMarkup(escapeHtml(part.replace(/\u0000/g, '')));
    })
    .join('');
}

interface Block {
  kind: 'p' | 'h' | 'code' | 'ul' | 'ol' | 'quote' | 'hr';
  lines: string[];
  level?: number;
  lang?: string;
}

const FENCE = /^\s*(```|~~~)\s*([\w+#.-]*)\s*$/;
const HEADING = /^(#{1,6})\s+(.*?)\s*#*\s*$/;
const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBERED = /^\s*\d{1,9}[.)]\s+(.*)$/;
const QUOTE = /^\s*>\s?(.*)$/;
const RULE = /^\s*([-*_])(\s*\1){2,}\s*$/;

/** The kind a line would start, for lines outside code fences. */
function lineKind(line: string): Block['kind'] {
  if (RULE.test(line)) {
    return 'hr';
  }
  if (HEADING.test(line)) {
    return 'h';
  }
  if (BULLET.test(line)) {
    return 'ul';
  }
  if (NUMBERED.test(line)) {
    return 'ol';
  }
  if (QUOTE.test(line)) {
    return 'quote';
  }
  return 'p';
}

/** Split source text into blocks (a fence left open runs to the end). */
export function parseBlocks(source: string): Block[] {
  const blocks: Block[] = [];
  const lines = source.replace(/\r\n?/g, '\n').split('\n');
  let fence: Block | null = null;
  let fenceMark = '';
  for (const line of lines) {
    const fenceMatch = FENCE.exec(line);
    if (fence) {
      if (fenceMatch && fenceMatch[1] === fenceMark && !fenceMatch[2]) {
        fence = null;
      } else {
        fence.lines.push(line);
      }
      continue;
    }
    if (fenceMatch) {
      fenceMark = fenceMatch[1];
      fence = { kind: 'code', lines: [], lang: fenceMatch[2] };
      blocks.push(fence);
      continue;
    }
    if (!line.trim()) {
      blocks.push({ kind: 'p', lines: [] }); // a blank line ends the block
      continue;
    }
    const kind = lineKind(line);
    const last = blocks[blocks.length - 1];
    const joins = last && last.lines.length > 0 && last.kind === kind;
    if (joins && (kind === 'p' || kind === 'ul' || kind === 'ol' || kind === 'quote')) {
      last.lines.push(line);
    } else {
      blocks.push({ kind, lines: [line] });
    }
  }
  return blocks.filter(b => b.kind === 'code' || b.kind === 'hr' || b.lines.length > 0);
}

/** One block as HTML. */
function renderBlock(block: Block): string {
  switch (block.kind) {
    case 'code': {
      const lang = block.lang ? ` data-lang="${escapeHtml(block.lang)}"` : '';
      return `<pre${lang}><code>${escapeHtml(block.lines.join('\n'))}</code></pre>`;
    }
    case 'hr':
      return '<hr>';
    case 'h': {
      const m = HEADING.exec(block.lines[0]) as RegExpExecArray;
      const level = m[1].length;
      return `<h${level}>${renderInline(m[2])}</h${level}>`;
    }
    case 'ul':
    case 'ol': {
      const re = block.kind === 'ul' ? BULLET : NUMBERED;
      const items = block.lines.map(l => `<li>${renderInline(re.exec(l)?.[1] ?? l)}</li>`);
      return `<${block.kind}>${items.join('')}</${block.kind}>`;
    }
    case 'quote': {
      const inner = block.lines.map(l => QUOTE.exec(l)?.[1] ?? l).join('\n');
      return `<blockquote>${renderMarkdown(inner)}</blockquote>`;
    }
    default:
      return `<p>${block.lines.map(l => renderInline(l.trim())).join('<br>')}</p>`;
  }
}

/** Render Markdown source to safe HTML. */
export function renderMarkdown(source: string): string {
  return parseBlocks(source).map(renderBlock).join('');
}
