import { z } from 'zod';
import { listOf } from '../api-docs/api-operation';
import { TOOLSET_NAMES } from './tool-registry';

export const toolSchema = z.object({
  name: z.string(),
  description: z.string(),
  parameters: z.record(z.string(), z.unknown()).describe('JSON Schema of its arguments'),
  mutating: z.boolean().describe('it may change state (approval mode `prompt` asks before it runs)'),
  toolsets: z.array(z.string()),
  available: z.boolean().describe('false when it cannot run on this deployment'),
  unavailable_reason: z.string().optional(),
  origin: z.string().optional().describe('for a tool the tenant added: its MCP server or OpenAPI service'),
}).meta({ id: 'Tool' });
export const toolListSchema = listOf(toolSchema);
export const toolsetListSchema = listOf(z.object({ name: z.enum(TOOLSET_NAMES), tools: z.array(z.string()) }));
