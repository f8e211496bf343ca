/**
 * What a model request carries of a run's tool results. The newest results go in full
 * until they add up to the budget; each older one is cut to its first characters with a
 * note saying so. Only what is sent is cut: the stored messages, the API and the events
 * keep every result whole. This bounds both the model's context and what the gateway reads
 * into memory for each model call, however long a session grows.
 */

/** Characters an older tool result keeps when it is past the budget. */
export const OLDER_RESULT_HEAD_CHARS = 2_000;

/** How many characters of a tool result go to the model, given the characters of newer results before it. */
export function toolResultAllowance(budgetChars: number, newerChars: number): number {
  return Math.max(Math.min(OLDER_RESULT_HEAD_CHARS, budgetChars), budgetChars - newerChars);
}

/** A tool result as sent: its head, and a note when the rest was left out. */
export function shortenedToolResult(head: string, fullChars: number): string {
  const omitted = fullChars - head.length;
  if (omitted <= 0) return head;
  return `${head}\n[${omitted.toLocaleString('en-US')} more characters of this tool result were left out of the model's context to keep it within its budget; the whole result is stored]`;
}
