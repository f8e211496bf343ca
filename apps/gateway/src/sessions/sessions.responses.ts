import { toolResultSchema } from '@app/contracts';
import { z } from 'zod';
import { listOf, timestamp } from '../api-docs/api-operation';

const backend = z.object({ type: z.literal('ssh'), server: z.string().nullable() }).describe("present when the session's tools run on a saved SSH server");

export const createdSessionSchema = z.object({
  id: z.string(),
  status: z.string(),
  metadata: z.record(z.string(), z.unknown()),
  created_at: timestamp(),
  backend: backend.optional(),
});

export const sessionSchema = z.object({
  id: z.string(),
  status: z.string(),
  metadata: z.record(z.string(), z.unknown()),
  created_at: timestamp(),
  sandbox: z.object({ state: z.string().describe('none, creating, running, stopped, ...') }),
  backend: backend.optional(),
}).meta({ id: 'Session' });

export const sessionListSchema = listOf(sessionSchema).extend({ next_cursor: z.string().nullable().describe('pass as cursor for the next page; null on the last') });

export const messageSchema = z.object({
  id: z.string(),
  run_id: z.string().nullable(),
  role: z.enum(['user', 'assistant', 'tool', 'system']),
  content: z.string().nullable(),
  tool_calls: z.array(z.object({ id: z.string(), type: z.literal('function'), function: z.object({ name: z.string(), arguments: z.string() }) })).optional(),
  tool_call_id: z.string().optional(),
  created_at: timestamp(),
}).meta({ id: 'Message' });
export const messageListSchema = listOf(messageSchema);

export { toolResultSchema };
