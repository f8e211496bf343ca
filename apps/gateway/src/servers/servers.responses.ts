import { z } from 'zod';
import { listOf, timestamp } from '../api-docs/api-operation';
import { ServerView } from './servers.service';

/** A saved server as the API shows it: its credentials are never given back. */
export const serverSchema = z.object({
  id: z.string(),
  name: z.string(),
  host: z.string(),
  port: z.number().int(),
  username: z.string(),
  auth: z.enum(['key', 'password']),
  host_key_fingerprint: z.string().nullable().describe('the pinned host key (SHA256:...), null until the first connection pins it'),
  host_key_pinned_at: timestamp().nullable(),
  created_at: timestamp(),
  updated_at: timestamp(),
}).meta({ id: 'Server' }) satisfies z.ZodType<ServerView>;
export const serverListSchema = listOf(serverSchema);
