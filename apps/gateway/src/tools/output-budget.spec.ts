import { applyOutputBudget, enforceOutputBudget } from './output-budget';

describe('applyOutputBudget', () => {
  it('leaves text within the budget alone', () => {
    expect(applyOutputBudget('x'.repeat(100), 100)).toBe('x'.repeat(100));
  });

  it('keeps the start and counts what was cut exactly', () => {
    expect(applyOutputBudget('a'.repeat(5000), 1000)).toBe(`${'a'.repeat(1000)}\n… 4000 characters cut (max_output_chars=1000)`);
  });

  it("keeps the tool's closing notes whole after the cut note, within the budget", () => {
    const notes = '\n… 1 more line (use offset=2 to continue)';
    const text = `header\n\n${'x'.repeat(5000)}${notes}`;
    const out = applyOutputBudget(text, 1000);
    expect(out.endsWith(notes)).toBe(true);
    const [head, cutNote] = splitLast(out.slice(0, -notes.length));
    expect(head.length + notes.length).toBe(1000);
    expect(text.startsWith(head)).toBe(true);
    expect(cutNote).toBe(`… ${text.length - notes.length - head.length} characters cut (max_output_chars=1000)`);
  });

  it('cuts a long last line that starts with "… " as content, not a note', () => {
    const text = `${'a'.repeat(2000)}\n… ${'b'.repeat(2000)}`;
    expect(applyOutputBudget(text, 1000)).toBe(`${'a'.repeat(1000)}\n… ${text.length - 1000} characters cut (max_output_chars=1000)`);
  });
});

describe('enforceOutputBudget', () => {
  it("passes a budgeted result through untouched, so its notes survive", () => {
    const budgeted = applyOutputBudget(`${'y'.repeat(3000)}\n… 3 more lines (use offset=5 to continue)`, 1000);
    expect(enforceOutputBudget(budgeted, 1000)).toBe(budgeted);
  });

  it('budgets a result far over the limit (a sandbox that did not)', () => {
    expect(enforceOutputBudget('z'.repeat(5000), 1000)).toBe(`${'z'.repeat(1000)}\n… 4000 characters cut (max_output_chars=1000)`);
  });
});

function splitLast(text: string): [string, string] {
  const i = text.lastIndexOf('\n');
  return [text.slice(0, i), text.slice(i + 1)];
}
