import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { MAX_DESCRIPTION_CHARS, MAX_SCHEMA_CHARS, mcpTenantTool, resultOf } from './mcp-tool';

const tool = (over: Partial<Tool> = {}): Tool => ({ name: 'search', description: 'Searches.', inputSchema: { type: 'object', properties: { q: { type: 'string' } } }, ...over });
const never = () => Promise.reject(new Error('not called'));

describe('mcpTenantTool', () => {
  it('names it mcp__<server>__<tool> in the server’s group, from that origin, with the server’s schema', () => {
    const offer = mcpTenantTool('github', tool(), never);
    if (!offer.ok) throw new Error(offer.reason);
    expect(offer.tool.definition.name).toBe('mcp__github__search');
    expect(offer.tool.groups).toEqual(['mcp__github']);
    expect(offer.tool.origin).toBe('mcp:github');
    expect(offer.tool.inputSchema).toEqual({ type: 'object', properties: { q: { type: 'string' } } });
  });

  it('is non-mutating only when the server says readOnlyHint: true', () => {
    const mutating = (annotations?: Tool['annotations']) => {
      const offer = mcpTenantTool('s', tool({ annotations }), never);
      return offer.ok && offer.tool.definition.mutating;
    };
    expect(mutating({ readOnlyHint: true })).toBe(false);
    expect(mutating({ readOnlyHint: false })).toBe(true);
    expect(mutating({ destructiveHint: false })).toBe(true);
    expect(mutating(undefined)).toBe(true);
  });

  it('skips a tool whose schema is not an object schema or too large, and bounds the description', () => {
    expect(mcpTenantTool('s', tool({ inputSchema: { type: 'string' } as unknown as Tool['inputSchema'] }), never)).toMatchObject({ ok: false, reason: expect.stringContaining('not an object schema') });
    const huge = { type: 'object' as const, properties: { q: { type: 'string', description: 'x'.repeat(MAX_SCHEMA_CHARS) } } };
    expect(mcpTenantTool('s', tool({ inputSchema: huge }), never)).toMatchObject({ ok: false, reason: expect.stringContaining('longer than') });
    const long = mcpTenantTool('s', tool({ description: 'd'.repeat(MAX_DESCRIPTION_CHARS * 2) }), never);
    expect(long.ok && long.tool.definition.description.length).toBe(MAX_DESCRIPTION_CHARS + 1);
  });

  it('calls the server by the tool’s own name, even when the offered name was shortened', async () => {
    const name = 'a_tool_name_long_enough_that_the_provider_limit_cuts_it_off_somewhere';
    const calls: string[] = [];
    const offer = mcpTenantTool('srv', tool({ name }), (_ctx, called) => {
      calls.push(called);
      return Promise.resolve({ content: [{ type: 'text', text: 'ok' }] });
    });
    if (!offer.ok) throw new Error(offer.reason);
    expect(offer.tool.definition.name.length).toBeLessThanOrEqual(64);
    await offer.tool.execute({ tenantId: 't', sessionId: 's', executorId: null, maxOutputChars: 1000, timeoutMs: 1000 }, {});
    expect(calls).toEqual([name]);
  });
});

describe('resultOf', () => {
  it('joins text, adds structured content as JSON, notes media and resources, and keeps isError', () => {
    const result = resultOf(
      {
        content: [
          { type: 'text', text: 'first' },
          { type: 'image', data: 'aGVsbG8=', mimeType: 'image/png' },
          { type: 'resource', resource: { uri: 'file:///a.txt', text: 'inside' } },
          { type: 'resource_link', uri: 'file:///b.txt', name: 'b' },
        ],
        structuredContent: { n: 1 },
        isError: true,
      },
      'srv',
      'tool',
    );
    expect(result.output).toBe('first\n[image image/png, 6 bytes, not shown]\n[resource file:///a.txt]\ninside\n[resource link file:///b.txt (b)]\n{"n":1}');
    expect(result.is_error).toBe(true);
  });

  it('does not repeat structured content the text already carries', () => {
    expect(resultOf({ content: [{ type: 'text', text: '{"n":1}' }], structuredContent: { n: 1 } }, 's', 't').output).toBe('{"n":1}');
  });
});
