// The chat panel's pure parts: stream events into an answer, items into turns and
// their responses, the tree's chain, titles and search, notebook context and its cuts.
import { describe, expect, it } from 'vitest';

import { assembleContext, contextBudget, cutMiddle, formatCell, parseContext, type CellContext } from '../src/chat/context';
import { emptyAnswer, reduceEvent, type StreamEvent } from '../src/chat/events';
import { statusText } from '../src/chat/statusText';
import { chatTitle, filterChats, relativeTime, sortChats, titleFromText, upsertChat } from '../src/chat/titles';
import { chainTo, leavesUnder, resendable, splitTurns, turnViews, userMessage } from '../src/chat/transcript';
import { readSettings, type Conversation, type ConversationItem, type ResponseNode } from '../src/chat/types';
import { mergeState } from '../src/chat/models';
import { requestBody } from '../src/chat/request';
import { applyTurn, firstText, isWhole, previewOf, type Round } from '../src/chat/storedTurn';

const reduce = (events: StreamEvent[]) => events.reduce(reduceEvent, emptyAnswer('m'));

describe('stream events', () => {
  it('collects text deltas, reasoning and the completed response', () => {
    const state = reduce([
      { type: 'response.created', response: { id: 'resp_1', model: 'tiny', previous_response_id: 'resp_0' } },
      { type: 'response.reasoning_text.delta', delta: 'think' },
      { type: 'response.reasoning.delta', delta: 'ing' },
      { type: 'response.output_text.delta', delta: 'Hel', output_index: 1 },
      { type: 'response.output_text.delta', delta: 'lo', output_index: 1 },
      {
        type: 'response.completed',
        response: { id: 'resp_1', usage: { input_tokens: 9, output_tokens: 2, input_tokens_details: { cached_tokens: 7 } } }
      }
    ]);
    expect(state).toMatchObject({
      responseId: 'resp_1',
      previousResponseId: 'resp_0',
      model: 'tiny',
      text: 'Hello',
      reasoning: 'thinking',
      status: 'completed',
      cachedTokens: 7,
      inputTokens: 9,
      outputTokens: 2
    });
  });

  it('separates two output messages and builds function calls', () => {
    const state = reduce([
      { type: 'response.output_text.delta', delta: 'a', output_index: 0 },
      { type: 'response.output_text.delta', delta: 'b', output_index: 2 },
      { type: 'response.output_item.added', item: { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'f', arguments: '' } },
      { type: 'response.function_call_arguments.delta', item_id: 'fc_1', delta: '{"x":' },
      { type: 'response.function_call_arguments.delta', item_id: 'fc_1', delta: '1}' },
      { type: 'response.output_item.done', item: { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'f', arguments: '{"x": 1}' } }
    ]);
    expect(state.text).toBe('a\n\nb');
    expect(state.calls).toEqual([{ itemId: 'fc_1', callId: 'call_1', name: 'f', arguments: '{"x": 1}' }]);
  });

  it('reports failures and error events', () => {
    expect(reduce([{ type: 'response.failed', response: { error: { message: 'boom' } } }])).toMatchObject({ status: 'failed', error: 'boom' });
    expect(reduce([{ type: 'error', error: { message: 'no' } }])).toMatchObject({ status: 'error', error: 'no' });
    expect(reduce([{ type: 'response.incomplete', response: {} }]).status).toBe('incomplete');
    expect(reduce([{ type: 'something.else' }])).toEqual(emptyAnswer('m'));
  });
});

const msg = (role: string, text: string, id?: string): ConversationItem => ({
  type: 'message',
  id,
  role,
  content: [{ type: role === 'assistant' ? 'output_text' : 'input_text', text }]
});

describe('transcript', () => {
  const ctx = assembleContext('nb.ipynb', [
    { id: 'c1', index: 0, kind: 'code', source: '1/0', executionCount: 1, outputs: [{ kind: 'error', text: 'tb', ename: 'ZeroDivisionError', evalue: 'division by zero' }] }
  ], 10_000).text;
  const items: ConversationItem[] = [
    msg('user', 'hi', 'msg_u1'),
    { type: 'reasoning', id: 'rs_1', summary: [], content: [{ type: 'reasoning_text', text: 'hmm' }] },
    msg('assistant', 'hello', 'msg_a1'),
    msg('user', ctx, 'msg_ctx'),
    msg('user', 'why?', 'msg_u2'),
    { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'f', arguments: '{}' },
    { type: 'function_call_output', id: 'fco_1', call_id: 'call_1', output: '42' },
    msg('assistant', 'because', 'msg_a3')
  ];
  const nodes: ResponseNode[] = [
    { id: 'r1', previous_response_id: null, created_at: 1, model: 'm1' },
    { id: 'r2', previous_response_id: 'r1', created_at: 2 },
    { id: 'r2b', previous_response_id: 'r1', created_at: 3 },
    { id: 'r3', previous_response_id: 'r2', created_at: 4 }
  ];

  it('splits items into turns at an input after an output', () => {
    expect(splitTurns(items).map(t => [t.inputs.length, t.outputs.length])).toEqual([[1, 2], [2, 1], [1, 1]]);
  });

  it('follows the chain from the head to the root', () => {
    expect(chainTo(nodes, 'r3')).toEqual(['r1', 'r2', 'r3']);
    expect(chainTo(nodes, 'r2b')).toEqual(['r1', 'r2b']);
    expect(chainTo(nodes, null)).toEqual([]);
    expect(leavesUnder(nodes, 'r1')).toEqual(['r3', 'r2b']);
  });

  it('matches turns with responses, context with chips and calls with outputs', () => {
    const views = turnViews(items, chainTo(nodes, 'r3'), new Map([['r1', 'm1']]));
    expect(views.map(v => [v.responseId, v.parentId])).toEqual([['r1', null], ['r2', 'r1'], ['r3', 'r2']]);
    expect(views[0]).toMatchObject({ userText: 'hi', userItemId: 'msg_u1', answerText: 'hello', reasoning: 'hmm', model: 'm1' });
    expect(views[1].userText).toBe('why?');
    expect(views[1].contexts).toEqual([{ path: 'nb.ipynb', cells: ['c1'], note: '' }]);
    expect(views[1].calls).toEqual([{ itemId: 'fc_1', callId: 'call_1', name: 'f', arguments: '{}', output: '42', state: 'done' }]);
    expect(views[2].userText).toBeNull(); // a function output, not a user message
  });

  it('leaves a pending turn without a response', () => {
    const views = turnViews([msg('user', 'a'), msg('assistant', 'b'), msg('user', 'c')], ['r1']);
    expect(views.map(v => v.responseId)).toEqual(['r1', null]);
  });

  it('resends a turn without its ids', () => {
    expect(resendable([msg('user', 'x', 'msg_1')])).toEqual([userMessage('x')]);
  });
});

const conv = (id: string, at: number, title: string | null = null, own?: string): Conversation => ({
  id,
  object: 'conversation',
  created_at: at,
  updated_at: at,
  metadata: own ? { title: own } : {},
  title
});

describe('titles and the chat list', () => {
  it('titles a chat by its own title, else its first message, else New chat', () => {
    expect(chatTitle(conv('a', 1, 'from text', 'Mine'))).toBe('Mine');
    expect(chatTitle(conv('a', 1, '  first\nmessage  '))).toBe('first message');
    expect(chatTitle(conv('a', 1))).toBe('New chat');
    expect(titleFromText('x'.repeat(100))).toHaveLength(80);
  });

  it('sorts newest first, searches case-insensitively and upserts', () => {
    const chats = [conv('a', 1, 'Alpha'), conv('b', 3, 'beta'), conv('c', 2, 'Gamma')];
    expect(sortChats(chats).map(c => c.id)).toEqual(['b', 'c', 'a']);
    expect(filterChats(chats, 'ALP').map(c => c.id)).toEqual(['a']);
    expect(filterChats(chats, ' ').length).toBe(3);
    expect(upsertChat(chats, conv('a', 9, 'Alpha')).map(c => c.id)).toEqual(['a', 'b', 'c']);
  });

  it('says how long ago', () => {
    expect(relativeTime(100, 110)).toBe('now');
    expect(relativeTime(0, 600)).toBe('10 min');
    expect(relativeTime(0, 7200)).toBe('2 h');
    expect(relativeTime(0, 86400 * 3)).toBe('3 d');
  });
});

const cell = (id: string, index: number, source: string, outputs: CellContext['outputs'] = []): CellContext => ({
  id,
  index,
  kind: 'code',
  source,
  executionCount: index + 1,
  outputs
});

describe('notebook context', () => {
  it('formats code, outputs and errors without colour codes', () => {
    const text = formatCell(cell('c', 0, 'x', [
      { kind: 'stream', text: 'out' },
      { kind: 'error', text: '\u001b[31mTraceback\u001b[0m', ename: 'ValueError', evalue: 'bad' }
    ]));
    expect(text).toContain('## Cell 1 (code, In [1])');
    expect(text).toContain('```python\nx\n```');
    expect(text).toContain('Output:\n```\nout\n```');
    expect(text).toContain('Error: ValueError: bad\n```\nTraceback\n```');
  });

  it('round-trips its marker and is stable for the same cells', () => {
    const cells = [cell('a', 0, 'one'), cell('b', 1, 'two')];
    const first = assembleContext('dir/nb "x".ipynb', cells, 10_000);
    expect(first.text).toBe(assembleContext('dir/nb "x".ipynb', cells, 10_000).text);
    expect(parseContext(first.text)).toEqual({ path: 'dir/nb "x".ipynb', cells: ['a', 'b'], note: '' });
    expect(first.dropped).toBe(0);
    expect(parseContext('just a question')).toBeNull();
  });

  it('cuts the cells farthest from the focus, with a note', () => {
    const cells = Array.from({ length: 10 }, (_, i) => cell(`c${i}`, i, 'x'.repeat(100)));
    const cut = assembleContext('nb.ipynb', cells, 500, 'c7');
    expect(cut.included).toContain('c7');
    expect(cut.included.length).toBeLessThan(10);
    expect(cut.dropped).toBe(10 - cut.included.length);
    expect(cut.marker.note).toContain(`${cut.dropped} of 10 cells left out`);
    expect(parseContext(cut.text)?.note).toBe(cut.marker.note);
    // without a focus, the last cells are kept
    expect(assembleContext('nb.ipynb', cells, 500).included).toContain('c9');
  });

  it('cuts the middle of one cell too large alone', () => {
    const big = assembleContext('nb.ipynb', [cell('a', 0, 'y'.repeat(5000))], 1000);
    expect(big.cutChars).toBeGreaterThan(0);
    expect(big.text.length).toBeLessThan(1500);
    expect(cutMiddle('abc', 10)).toBe('abc');
    expect(contextBudget(1000, 200, 100, 3)).toBe((1000 - 200 - 100 - 64) * 3);
    expect(contextBudget(100, 200, 0)).toBe(0);
  });
});

describe('settings, models and the status item', () => {
  it('reads settings with defaults for what is missing or wrong', () => {
    expect(readSettings({ temperature: 0.5, maxOutputTokens: 'x', autoApproveTools: true })).toEqual({
      defaultModel: '',
      instructions: '',
      temperature: 0.5,
      maxOutputTokens: null,
      autoApproveTools: true,
      offerKernelTools: false,
      toolChoice: 'auto',
      reasoningEffort: null
    });
    expect(readSettings({ reasoningEffort: 'none' }).reasoningEffort).toBe('none');
    expect(readSettings({ reasoningEffort: 'max' }).reasoningEffort).toBeNull();
    expect(readSettings({ toolChoice: 'required' }).toolChoice).toBe('required');
    expect(readSettings({ toolChoice: 'always' }).toolChoice).toBe('auto');
  });

  it('merges model states, keeping the context size while loaded', () => {
    const loaded = { id: 'm', state: 'loaded', progress: null, error: null, contextSize: 4096 };
    expect(mergeState(loaded, { id: 'm', state: 'loaded' }).contextSize).toBe(4096);
    expect(mergeState(loaded, { id: 'm', state: 'unloaded' }).contextSize).toBeNull();
  });

  it('says the model and its state', () => {
    const downloading = { id: 'm', state: 'downloading', progress: { done_bytes: 1, total_bytes: 2, bytes_per_second: null, fraction: 0.42 }, error: null, contextSize: null };
    expect(statusText('m', downloading, false)).toBe('m · downloading 42%');
    expect(statusText('m', downloading, true)).toBe('m · generating');
    expect(statusText('', undefined, false)).toBe('Superfluid: no model');
  });
});

describe('the request of a round', () => {
  const input: ConversationItem[] = [userMessage('hi')];
  const round = { model: 'm', conversation: 'conv_1', input, forkFrom: undefined, first: true };
  const settings = { ...readSettings({}), toolChoice: 'required' as const, reasoningEffort: 'none' as const };

  it('continues the head, forks at a response, or starts a branch from the root', () => {
    expect(requestBody(readSettings({}), round, [])).toEqual({ model: 'm', input, conversation: 'conv_1' });
    expect(requestBody(readSettings({}), { ...round, forkFrom: 'resp_1' }, [])).toMatchObject({ previous_response_id: 'resp_1' });
    const root = requestBody(readSettings({}), { ...round, forkFrom: null }, []);
    expect(root.branch_from_root).toBe(true);
    expect(root.previous_response_id).toBeUndefined();
  });

  it('sends the tool choice with the first round only, and only with tools', () => {
    const tools = [{ type: 'function', name: 'run_cell' }];
    expect(requestBody(settings, round, tools)).toMatchObject({ tools, tool_choice: 'required', reasoning: { effort: 'none' } });
    expect(requestBody(settings, { ...round, first: false }, tools).tool_choice).toBeUndefined();
    expect(requestBody(settings, round, []).tool_choice).toBeUndefined();
  });
});

describe('a finished turn applied from its stream', () => {
  const answer = (id: string, output: ConversationItem[], status: 'completed' | 'incomplete' | 'stopped' = 'completed') => ({
    ...emptyAnswer('tiny'),
    responseId: id,
    status,
    output,
    createdAt: 50
  });
  const start = conv('conv_1', 10);
  const kept = splitTurns([msg('user', 'hi', 'msg_u1'), msg('assistant', 'hello', 'msg_a1'), msg('user', 'gone', 'msg_u2'), msg('assistant', 'x', 'msg_a2')]);
  const tree: ResponseNode[] = [
    { id: 'r1', previous_response_id: null, created_at: 1 },
    { id: 'r2', previous_response_id: 'r1', created_at: 2 }
  ];

  it('forks after the kept turns: their items, the round input and output, a new node and head', () => {
    const call: ConversationItem = { type: 'function_call', id: 'fc_1', call_id: 'c1', name: 'f', arguments: '{}' };
    const outputs: ConversationItem = { type: 'function_call_output', call_id: 'c1', output: '42' };
    const rounds: Round[] = [
      { input: [userMessage('again?')], answer: answer('r3', [call]) },
      { input: [outputs], answer: answer('r4', [msg('assistant', 'done', 'msg_a4')], 'incomplete') }
    ];
    expect(isWhole(rounds)).toBe(true);
    const view = applyTurn(start, kept.slice(0, 1), 'r1', tree, rounds);
    expect(view.conv.head_response_id).toBe('r4');
    expect(view.conv.updated_at).toBe(50);
    expect(view.items.map(i => i.id ?? i.type)).toEqual(['msg_u1', 'msg_a1', 'message', 'fc_1', 'function_call_output', 'msg_a4']);
    expect(view.nodes.slice(2).map(n => [n.id, n.previous_response_id, n.status])).toEqual([
      ['r3', 'r1', 'completed'],
      ['r4', 'r3', 'incomplete']
    ]);
    expect(chainTo(view.nodes, view.conv.head_response_id)).toEqual(['r1', 'r3', 'r4']);
    expect(view.nodes[3].preview).toBe('42 → done');
  });

  it('titles a new chat from its first message, as the server does', () => {
    const view = applyTurn(start, [], null, [], [{ input: [userMessage('  What   is\nthis? ')], answer: answer('r1', []) }]);
    expect(view.conv.title).toBe('What is this?');
    expect(applyTurn({ ...start, title: 'Kept' }, [], null, [], [{ input: [userMessage('b')], answer: answer('r1', []) }]).conv.title).toBe('Kept');
    expect(firstText([msg('user', 'y'.repeat(100))])).toHaveLength(80);
  });

  it('is not whole when a round stopped, failed or gave no output', () => {
    expect(isWhole([])).toBe(false);
    expect(isWhole([{ input: [], answer: answer('r1', [], 'stopped') }])).toBe(false);
    expect(isWhole([{ input: [], answer: { ...answer('r1', []), output: null } }])).toBe(false);
    expect(isWhole([{ input: [], answer: { ...answer('r1', []), responseId: null } }])).toBe(false);
  });

  it('keeps the output items of the finished response only', () => {
    const out = [msg('assistant', 'a', 'msg_1')];
    const created = reduceEvent(emptyAnswer('m'), { type: 'response.created', response: { id: 'r', created_at: 7 } });
    expect(created).toMatchObject({ output: null, createdAt: 7 });
    expect(reduceEvent(created, { type: 'response.completed', response: { id: 'r', output: out } }).output).toEqual(out);
  });

  it('previews the last input, then the answer, cut to 80 characters', () => {
    expect(previewOf([userMessage('q'.repeat(60))], [msg('assistant', 'a'.repeat(60))])).toBe('q'.repeat(40) + ' → ' + 'a'.repeat(37));
    expect(previewOf([], [])).toBe(' → ');
  });
});
