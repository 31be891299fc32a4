import { describe, expect, it } from 'vitest';

import { escapeHtml, parseBlocks, renderInline, renderMarkdown } from '../src/markdown';

describe('escaping', () => {
  it('escapes every HTML-significant character', () => {
    expect(escapeHtml(`<a href="x" onclick='y'>&</a>`)).toBe(
      '&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;'
    );
  });

  it('never lets raw HTML through, in any block', () => {
    const evil = '<script>alert(1)</script>';
    for (const src of [evil, `# ${evil}`, `- ${evil}`, `> ${evil}`, '```\n' + evil + '\n```', `**${evil}**`, `\`${evil}\``]) {
      const html = renderMarkdown(src);
      expect(html).not.toContain('<script');
      expect(html).toContain('&lt;script&gt;');
    }
  });

  it('keeps only http(s) and mailto links', () => {
    expect(renderInline('[ok](https://example.com/a?b=1&c=2)')).toBe(
      '<a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer">ok</a>'
    );
    expect(renderInline('[bad](javascript:alert(1))')).not.toContain('href');
    expect(renderInline('[q](https://x.org/"onmouseover="y)')).not.toContain('"onmouseover');
  });
});

describe('blocks', () => {
  it('renders paragraphs, headings, lists, quotes and rules', () => {
    const html = renderMarkdown('# Title\n\nsome *text* and **bold**\nnext line\n\n- a\n- b\n\n1. one\n2. two\n\n> quoted\n\n---');
    expect(html).toBe(
      '<h1>Title</h1><p>some <em>text</em> and <strong>bold</strong><br>next line</p>' +
        '<ul><li>a</li><li>b</li></ul><ol><li>one</li><li>two</li></ol>' +
        '<blockquote><p>quoted</p></blockquote><hr>'
    );
  });

  it('keeps code literal, and an open fence runs to the end while streaming', () => {
    expect(renderMarkdown('```py\nx = 1 * 2 * 3\n```')).toBe('<pre data-lang="py"><code>x = 1 * 2 * 3</code></pre>');
    expect(renderMarkdown('text\n```\n**not bold**')).toBe('<p>text</p><pre><code>**not bold**</code></pre>');
    expect(renderInline('`a*b*c` and *d*')).toBe('<code>a*b*c</code> and <em>d</em>');
  });

  it('does not italicise inside words or links', () => {
    expect(renderInline('snake_case_name')).toBe('snake_case_name');
    expect(renderInline('[x](https://a.org/b_c_d)')).toContain('href="https://a.org/b_c_d"');
  });

  it('splits blocks on blank lines and survives random text', () => {
    expect(parseBlocks('a\n\nb').map(b => b.kind)).toEqual(['p', 'p']);
    const noise = Array.from({ length: 2000 }, (_, i) => String.fromCharCode(32 + ((i * 7919) % 95))).join('');
    expect(() => renderMarkdown(noise)).not.toThrow();
    expect(renderMarkdown(noise)).not.toMatch(/<(?!\/?(p|br|em|strong|code|a|h\d|ul|ol|li|pre|blockquote|hr)[\s>])/);
  });
});
