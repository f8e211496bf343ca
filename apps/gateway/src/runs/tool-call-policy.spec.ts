import { callMutates, canonicalJson, CallFacts, decideCall, guardrailNote, PolicyContext } from './tool-call-policy';

const ctx = (over: Partial<PolicyContext> = {}): PolicyContext => ({
  offered: new Set(['terminal', 'read_file', 'write_file']),
  approvalMode: 'auto',
  hardStopAfter: 32,
  repeatLimit: 3,
  earlierKeys: [],
  ...over,
});
const call = (over: Partial<CallFacts> = {}): CallFacts => ({ seq: 1, name: 'terminal', key: 'terminal:{"command":"ls"}', mutating: true, subject: 'ls', isShell: true, ...over });

describe('decideCall', () => {
  it('runs in auto mode, and read-only tools in every mode', () => {
    expect(decideCall(call(), ctx())).toEqual({ kind: 'run', via: 'auto' });
    for (const approvalMode of ['auto', 'prompt', 'deny'] as const) {
      expect(decideCall(call({ name: 'read_file', mutating: false }), ctx({ approvalMode }))).toEqual({ kind: 'run', via: 'read_only' });
    }
  });

  it('asks in prompt mode and refuses in deny mode for mutating tools', () => {
    expect(decideCall(call(), ctx({ approvalMode: 'prompt' })).kind).toBe('ask');
    expect(decideCall(call(), ctx({ approvalMode: 'deny' }))).toMatchObject({ kind: 'refuse', code: 'mode_deny' });
  });

  it('checks in order: hard stop, offer, arguments, repetition, rules, mode', () => {
    const everything = call({ seq: 40, name: 'nope', argumentProblem: 'bad', key: 'k' });
    const context = ctx({ earlierKeys: ['k', 'k', 'k'], permissions: { deny: ['*'] } });
    expect(decideCall(everything, context)).toMatchObject({ code: 'hard_stop' });
    expect(decideCall({ ...everything, seq: 1 }, context)).toMatchObject({ code: 'not_offered' });
    expect(decideCall({ ...everything, seq: 1, name: 'terminal' }, context)).toMatchObject({ code: 'invalid_arguments' });
    expect(decideCall({ ...everything, seq: 1, name: 'terminal', argumentProblem: undefined }, context)).toMatchObject({ code: 'repetition' });
    expect(decideCall({ ...everything, seq: 1, name: 'terminal', argumentProblem: undefined, key: 'other' }, context)).toMatchObject({ code: 'rule_deny' });
  });

  it('lets rules decide before the mode', () => {
    expect(decideCall(call(), ctx({ approvalMode: 'deny', permissions: { allow: ['terminal(ls)'] } }))).toEqual({ kind: 'run', via: 'rule_allow', rule: 'terminal(ls)' });
    expect(decideCall(call(), ctx({ approvalMode: 'auto', permissions: { ask: ['terminal'] } })).kind).toBe('ask');
    expect(decideCall(call({ name: 'read_file', mutating: false }), ctx({ permissions: { deny: ['read_file'] } }))).toMatchObject({ code: 'rule_deny' });
  });

  it("treats the tools the tenant marked as mutating, and a run's allow rule does not pass them", () => {
    const fetch = call({ name: 'web_fetch', mutating: false, key: 'web_fetch:{}', subject: undefined, isShell: false });
    const offered = new Set(['web_fetch']);
    const marked = ctx({ offered, approvalRequired: new Set(['web_fetch']) });
    expect(decideCall(fetch, { ...marked, approvalMode: 'prompt' })).toEqual({
      kind: 'ask',
      reason: 'web_fetch needs approval for this tenant and the approval mode is prompt',
    });
    expect(decideCall(fetch, { ...marked, approvalMode: 'deny' })).toMatchObject({ kind: 'refuse', code: 'mode_deny' });
    expect(decideCall(fetch, { ...marked, approvalMode: 'prompt', permissions: { allow: ['web_fetch'] } }).kind).toBe('ask');
    expect(decideCall(fetch, { ...marked, permissions: { deny: ['web_fetch'] } })).toMatchObject({ code: 'rule_deny' });
    // Unmarked, or marked for another tool, it stays read-only.
    expect(decideCall(fetch, ctx({ offered, approvalMode: 'prompt' }))).toEqual({ kind: 'run', via: 'read_only' });
    expect(decideCall(fetch, ctx({ offered, approvalMode: 'prompt', approvalRequired: new Set(['browser']) }))).toEqual({ kind: 'run', via: 'read_only' });
  });

  it('counts only identical calls in an unbroken row for the repetition guard', () => {
    expect(decideCall(call({ key: 'a' }), ctx({ earlierKeys: ['a', 'a'] })).kind).toBe('run');
    expect(decideCall(call({ key: 'a' }), ctx({ earlierKeys: ['a', 'a', 'a'] })).kind).toBe('refuse');
    expect(decideCall(call({ key: 'a' }), ctx({ earlierKeys: ['a', 'a', 'a', 'b', 'a'] })).kind).toBe('run');
    expect(decideCall(call({ key: 'a' }), ctx({ earlierKeys: ['a'], repeatLimit: 1 })).kind).toBe('refuse');
  });
});

describe('not offered', () => {
  it('tells the model why a tool its selection named is held back', () => {
    const decision = decideCall(call({ name: 'delegate_task' }), ctx({ withheld: new Map([['delegate_task', 'sub-runs may nest at most 2 deep']]) }));
    expect(decision).toMatchObject({ kind: 'refuse', code: 'not_offered' });
    expect(decision.kind === 'refuse' && decision.message).toBe(
      'refused: tool delegate_task is not available here: sub-runs may nest at most 2 deep, so nothing ran. The tools you can call are: read_file, terminal, write_file.',
    );
  });
});

describe('callMutates', () => {
  const memory = { mutating: true, mutatingCall: (a: Record<string, unknown>) => a.action === 'save' || a.action === 'delete' };

  it('asks the tool about this call when its actions differ', () => {
    expect(callMutates(memory, { action: 'save', content: 'x' })).toBe(true);
    expect(callMutates(memory, { action: 'delete', id: 'mem_1' })).toBe(true);
    expect(callMutates(memory, { action: 'search', query: 'x' })).toBe(false);
    expect(callMutates(memory, { action: 'list' })).toBe(false);
  });

  it('falls back to the catalogue flag, and treats unknown tools and unreadable arguments as mutating', () => {
    expect(callMutates(memory, undefined)).toBe(true);
    expect(callMutates({ mutating: false }, { path: 'a' })).toBe(false);
    expect(callMutates({ mutating: true }, { command: 'ls' })).toBe(true);
    expect(callMutates(undefined, {})).toBe(true);
  });

  it('lets a read-only memory call through in deny mode while a save is refused', () => {
    const search = call({ name: 'memory', mutating: callMutates(memory, { action: 'search', query: 'x' }) });
    const save = call({ name: 'memory', mutating: callMutates(memory, { action: 'save', content: 'x' }) });
    const context = ctx({ offered: new Set(['memory']), approvalMode: 'deny' });
    expect(decideCall(search, context)).toEqual({ kind: 'run', via: 'read_only' });
    expect(decideCall(save, context)).toMatchObject({ kind: 'refuse', code: 'mode_deny' });
  });
});

describe('guardrailNote', () => {
  it('warns exactly at warn_after and stops at hard_stop_after', () => {
    expect(guardrailNote(23, 24, 32)).toBeUndefined();
    expect(guardrailNote(24, 24, 32)?.kind).toBe('warning');
    expect(guardrailNote(25, 24, 32)).toBeUndefined();
    expect(guardrailNote(32, 24, 32)?.kind).toBe('hard_stop');
    expect(guardrailNote(10, 10, 10)?.kind).toBe('hard_stop');
  });
});

describe('canonicalJson', () => {
  it('ignores key order, keeps array order', () => {
    expect(canonicalJson({ b: 1, a: { d: [2, 1], c: null } })).toBe(canonicalJson({ a: { c: null, d: [2, 1] }, b: 1 }));
    expect(canonicalJson([1, 2])).not.toBe(canonicalJson([2, 1]));
  });
});
