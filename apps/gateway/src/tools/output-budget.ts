/**
 * The output budget, applied once to a result where it is produced: by the sandbox agent
 * for sandbox tools (runbox_tools/output_budget.py, the same rule), here for tools that run
 * in the gateway. Nothing cuts a result after that, so the notes written here stay.
 *
 * A text over `limit` characters keeps its start and then says exactly how many characters
 * were cut. The tool's own closing notes (its last lines starting with "… ", such as
 * "… 1 more line (use offset=2 to continue)") are kept whole after that note and count
 * against the budget: they tell the model how to go on.
 */
export function applyOutputBudget(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const [body, notes] = splitClosingNotes(text);
  const keep = Math.max(limit - notes.length, 0);
  return `${body.slice(0, keep)}${cutNote(body.length - keep, limit)}${notes}`;
}

/** Closing notes kept through a cut: a few short lines, never a way to keep content uncut. */
const MAX_CLOSING_NOTES = 3;
const MAX_NOTE_CHARS = 300;

/** The most a result that went through the budget can exceed it by: the cut note, with a count of up to 16 digits. */
const BUDGETED_EXCESS = 80;

/**
 * A guard for results from a sandbox, which applied the budget itself: a result it shaped
 * passes untouched (its notes intact); one longer than any budgeted result can be (a
 * sandbox that broke the rule) is put through the budget here.
 */
export function enforceOutputBudget(text: string, limit: number): string {
  return text.length <= limit + BUDGETED_EXCESS ? text : applyOutputBudget(text, limit);
}

function splitClosingNotes(text: string): [string, string] {
  let start = text.length;
  for (let i = 0; i < MAX_CLOSING_NOTES; i++) {
    const lineStart = text.lastIndexOf('\n', start - 1);
    if (lineStart < 0 || !text.startsWith('\n… ', lineStart) || start - lineStart > MAX_NOTE_CHARS) break;
    start = lineStart;
  }
  return [text.slice(0, start), text.slice(start)];
}

function cutNote(cut: number, limit: number): string {
  return `\n… ${cut} characters cut (max_output_chars=${limit})`;
}
