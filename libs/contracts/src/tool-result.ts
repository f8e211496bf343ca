import { z } from 'zod';

/** What every tool returns, wherever it runs. */
export const toolResultSchema = z.object({
  output: z.string(),
  metadata: z.record(z.string(), z.unknown()),
  is_error: z.boolean(),
});
export type ToolResult = z.infer<typeof toolResultSchema>;

export const rpcErrorSchema = z.object({ code: z.string(), message: z.string() });
export type RpcError = z.infer<typeof rpcErrorSchema>;

export const ids = {
  tenant: z.string().min(1).max(64),
  session: z.string().min(1).max(64),
};
