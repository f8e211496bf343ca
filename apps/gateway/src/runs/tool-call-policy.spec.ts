import { canonicalJson, CallFacts, decideCall, guardrailNote, PolicyContext } from './tool-call-policy';

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

  it('counts only identical calls in an unbroken row for the repetition guard', () => {
    expect(decideCall(call({ key: 'a' }), ctx({ earlierKeys: ['a', 'a'] })).kind).toBe('run');
    expect(decideCall(call({ key: 'a' }), ctx({ earlierKeys: ['a', 'a', 'a'] })).kind).toBe('refuse');
    expect(decideCall(call({ key: 'a' }), ctx({ earlierKeys: ['a', 'a', 'a', 'b', 'a'] })).kind).toBe('run');
    expect(decideCall(call({ key: 'a' }), ctx({ earlierKeys: ['a'], repeatLimit: 1 })).kind).toBe('refuse');
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
