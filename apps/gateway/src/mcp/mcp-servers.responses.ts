import { z } from 'zod';
import { listOf, timestamp } from '../api-docs/api-operation';
import { McpServerView } from './mcp-servers.service';

/** An MCP server as the API shows it: names of its headers and env, never their values. */
export const mcpServerSchema = z.object({
  id: z.string(),
  name: z.string(),
  transport: z.enum(['streamable_http', 'stdio']),
  url: z.string().optional(),
  header_names: z.array(z.string()).optional(),
  command: z.string().optional(),
  args: z.array(z.string()).optional(),
  env_names: z.array(z.string()).optional(),
  status: z.enum(['unknown', 'ok', 'failing', 'parked']),
  last_error: z.string().nullable(),
  last_error_at: timestamp().nullable(),
  last_success_at: timestamp().nullable(),
  created_at: timestamp(),
  updated_at: timestamp(),
}).meta({ id: 'McpServer' }) satisfies z.ZodType<McpServerView>;
export const mcpServerListSchema = listOf(mcpServerSchema);
