import { z } from 'zod';

export const writtenFileSchema = z.object({
  path: z.string().describe('the path written, relative to the workspace'),
  size: z.number().int().describe('bytes stored'),
  sha256: z.string().describe('hex digest of the bytes stored'),
});

export const deletedPathSchema = z.object({ path: z.string(), kind: z.enum(['file', 'dir']) });

export const importedArchiveSchema = z.object({ path: z.string().describe('the folder imported into'), entries: z.number().int() });
