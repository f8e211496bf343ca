import { createHash } from 'node:crypto';

/** The longest tool name providers take (OpenAI: 64 characters of `[a-zA-Z0-9_-]`). */
export const MAX_PROVIDER_TOOL_NAME = 64;

const HASH_CHARS = 8;

/**
 * The name a tenant-added tool is offered under: its parts (`mcp`, server, tool; or service,
 * operation) joined by `__`, with every character a provider would refuse replaced by `_`.
 * A name that is still too long, or that had to change, keeps its readable start and ends in
 * a hash of the original parts, so two different tools never end up with one name and the
 * same tool always gets the same one. The caller keeps the mapping back to the original
 * (the TenantTool object carries it).
 */
export function providerToolName(...parts: string[]): string {
  const original = parts.join('__');
  const safe = parts.map((p) => p.replace(/[^a-zA-Z0-9_-]/g, '_')).join('__');
  if (safe === original && safe.length <= MAX_PROVIDER_TOOL_NAME) return safe;
  const hash = createHash('sha256').update(JSON.stringify(parts)).digest('hex').slice(0, HASH_CHARS);
  return `${safe.slice(0, MAX_PROVIDER_TOOL_NAME - HASH_CHARS - 1)}_${hash}`;
}
