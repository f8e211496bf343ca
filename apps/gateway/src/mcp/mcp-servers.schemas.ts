import { z } from 'zod';

/**
 * The `<server>` in `mcp__<server>__<tool>`: provider-safe characters, short enough to leave
 * room for tool names, and without `__` so a tool name splits back into one server and tool.
 */
export const mcpServerName = z
  .string()
  .min(1)
  .max(32)
  .regex(/^[a-zA-Z0-9_-]+$/, 'letters, digits, dash and underscore')
  .refine((name) => !name.includes('__'), 'no double underscore (it separates server and tool in mcp__<server>__<tool>)');

const url = z
  .string()
  .max(2048)
  .refine((value) => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol), 'an http:// or https:// URL');

/** Header names as HTTP allows them; the values are secrets (tokens), sealed at rest. */
const headers = z
  .record(
    z
      .string()
      .max(128)
      .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, 'a header name'),
    z
      .string()
      .max(8192)
      .refine((v) => !/[\r\n\0]/.test(v), 'no line breaks or NUL in a header value'),
  )
  .refine((h) => Object.keys(h).length <= 32, 'at most 32 headers');

const env = z
  .record(z.string().max(128).regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name'), z.string().max(8192).refine((v) => !v.includes('\0'), 'no NUL'))
  .refine((e) => Object.keys(e).length <= 64, 'at most 64 variables');

const command = z
  .string()
  .min(1)
  .max(1024)
  .refine((v) => !v.includes('\0'), 'no NUL');

const args = z
  .array(
    z
      .string()
      .max(4096)
      .refine((v) => !v.includes('\0'), 'no NUL'),
  )
  .max(64);

const httpServer = z.object({ name: mcpServerName, transport: z.literal('streamable_http'), url, headers: headers.optional() }).strict();
const stdioServer = z.object({ name: mcpServerName, transport: z.literal('stdio'), command, args: args.optional(), env: env.optional() }).strict();

export const createMcpServerSchema = z.discriminatedUnion('transport', [httpServer, stdioServer]);

/**
 * A change: any field of the server's transport. `headers` and `env` replace the stored ones
 * whole (values are never given back, so there is nothing to merge with); the transport
 * itself cannot change (delete and add the server again).
 */
export const updateMcpServerSchema = z
  .object({ name: mcpServerName.optional(), url: url.optional(), headers: headers.optional(), command: command.optional(), args: args.optional(), env: env.optional() })
  .strict();

export type CreateMcpServerInput = z.infer<typeof createMcpServerSchema>;
export type UpdateMcpServerInput = z.infer<typeof updateMcpServerSchema>;
