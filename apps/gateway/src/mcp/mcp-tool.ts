import { z } from 'zod';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { GatewayToolContext, GatewayToolResult } from '../tools/gateway-tool';
import { providerToolName } from '../tools/provider-tool-name';
import { TenantTool } from '../tools/tenant-tool';

/** Description characters kept from a server (it is prompt text every turn). */
export const MAX_DESCRIPTION_CHARS = 2_000;
/** JSON characters of one tool's input schema; a larger schema skips the tool. */
export const MAX_SCHEMA_CHARS = 16_000;
/** The default time limit of an MCP tool call (a run's limits.timeouts overrides it per tool). */
export const MCP_TOOL_TIMEOUT_SECONDS = 60;

export type McpCall = (ctx: GatewayToolContext, tool: string, args: Record<string, unknown>) => Promise<CallToolResult>;

/** A server's tool as a TenantTool, or why it cannot be offered. */
export type McpToolOffer = { ok: true; tool: TenantTool } | { ok: false; name: string; reason: string };

/**
 * `mcp__<server>__<tool>` (shortened to what providers take, see providerToolName), in group
 * `mcp__<server>`. It mutates unless the server says `readOnlyHint: true`: a hint missing or
 * false asks under approval_mode prompt and is refused under deny.
 */
export function mcpTenantTool(server: string, tool: Tool, call: McpCall): McpToolOffer {
  const name = providerToolName('mcp', server, tool.name);
  const schema = tool.inputSchema as Record<string, unknown>;
  if (schema?.type !== 'object') return { ok: false, name, reason: `the input schema of ${tool.name.slice(0, 200)} is not an object schema` };
  if (JSON.stringify(schema).length > MAX_SCHEMA_CHARS) return { ok: false, name, reason: `the input schema of ${tool.name.slice(0, 200)} is longer than ${MAX_SCHEMA_CHARS} characters` };
  const described = tool.description ?? tool.title ?? tool.annotations?.title ?? `${tool.name} (from the MCP server ${server})`;
  const description = described.length > MAX_DESCRIPTION_CHARS ? `${described.slice(0, MAX_DESCRIPTION_CHARS)}…` : described;
  return {
    ok: true,
    tool: {
      definition: {
        name,
        description,
        // The server validates the arguments against its schema; here only "an object".
        parameters: z.record(z.string(), z.unknown()),
        mutating: tool.annotations?.readOnlyHint !== true,
        toolsets: [],
        runsIn: 'gateway',
        timeoutSeconds: MCP_TOOL_TIMEOUT_SECONDS,
      },
      inputSchema: schema,
      groups: [`mcp__${server}`],
      origin: `mcp:${server}`,
      execute: async (ctx, args) => resultOf(await call(ctx, tool.name, args), server, tool.name),
    },
  };
}

/**
 * What the model reads: text content joined, structured content as JSON (when the text does
 * not already say it), and a note for each image, audio clip or resource (their bytes are not
 * passed on). The router cuts it to the run's output budget.
 */
export function resultOf(result: CallToolResult, server: string, tool: string): GatewayToolResult {
  const parts: string[] = [];
  for (const item of result.content ?? []) {
    switch (item.type) {
      case 'text':
        parts.push(item.text);
        break;
      case 'image':
      case 'audio':
        parts.push(`[${item.type} ${item.mimeType}, ${Math.floor((item.data.length * 3) / 4)} bytes, not shown]`);
        break;
      case 'resource':
        parts.push('text' in item.resource ? `[resource ${item.resource.uri}]\n${item.resource.text}` : `[resource ${item.resource.uri}, binary, not shown]`);
        break;
      case 'resource_link':
        parts.push(`[resource link ${item.uri}${item.name ? ` (${item.name})` : ''}]`);
        break;
    }
  }
  if (result.structuredContent !== undefined) {
    const json = JSON.stringify(result.structuredContent);
    if (!parts.some((p) => p.trim() === json)) parts.push(json);
  }
  return { output: parts.join('\n'), metadata: { mcp_server: server, mcp_tool: tool }, is_error: result.isError === true };
}
