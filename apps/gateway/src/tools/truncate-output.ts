/**
 * Cuts a tool's output to `limit` characters with a last line saying how much was cut.
 * The sandbox agent applies the same rule to what it returns (runbox_tools/registry.py).
 */
export function truncateOutput(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const cut = text.length - limit;
  return `${text.slice(0, limit)}\n… ${cut} characters cut (max_output_chars=${limit})`;
}
