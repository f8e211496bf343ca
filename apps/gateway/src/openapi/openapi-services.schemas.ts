import { z } from 'zod';
import { MAX_OPERATIONS } from './openapi-document';

/** Characters of an inline document (JSON text or YAML); the request body limit applies too. */
export const MAX_INLINE_SPEC_CHARS = 1_000_000;

/**
 * A service name prefixes its tools (`<name>__<operationId>`) and admits them all in a run's
 * `tools`; the `mcp` prefix stays free for MCP servers, and built-in names are checked by the
 * service (the catalogue is known there).
 */
export const serviceName = z
  .string()
  .min(1)
  .max(32)
  .regex(/^[a-zA-Z0-9_-]+$/, 'letters, digits, dash and underscore')
  .refine((name) => !/^mcp/i.test(name), 'may not start with "mcp" (that prefix names MCP servers)')
  .refine((name) => !name.includes('__'), 'may not contain "__" (it separates the service from the operation in tool names)');

const headerName = z.string().min(1).max(128).regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'an HTTP header name');
/** A credential goes into a header or a query string: no line breaks. */
const secret = z.string().min(1).max(8192).regex(/^[^\r\n\0]+$/, 'no line breaks');

export const authSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('bearer'), token: secret }).strict(),
  z
    .object({ type: z.literal('header'), name: headerName, value: secret })
    .strict()
    .refine((a) => !['host', 'content-length', 'content-type', 'transfer-encoding', 'connection'].includes(a.name.toLowerCase()), {
      path: ['name'],
      message: 'not a header a credential can go in',
    }),
  z.object({ type: z.literal('query'), name: z.string().min(1).max(128), value: secret }).strict(),
]);

export type OpenApiAuth = z.infer<typeof authSchema>;

export const createServiceSchema = z
  .object({
    name: serviceName,
    spec_url: z.url({ protocol: /^https?$/, error: 'an http(s) URL' }).max(2048).optional(),
    /** The document itself: a JSON object, or its JSON or YAML text. */
    spec: z.union([z.record(z.string(), z.unknown()), z.string().min(1).max(MAX_INLINE_SPEC_CHARS)]).optional(),
    operations: z
      .array(z.string().min(1).max(256))
      .min(1)
      .max(MAX_OPERATIONS, `at most ${MAX_OPERATIONS} operations per service`)
      .refine((ids) => new Set(ids).size === ids.length, 'each operationId once')
      .optional(),
    auth: authSchema.optional(),
  })
  .strict()
  .superRefine((v, ctx) => {
    if (v.spec === undefined && v.spec_url === undefined) ctx.addIssue({ code: 'custom', path: ['spec'], message: 'give the document as spec, or where to fetch it as spec_url' });
    if (v.spec !== undefined && v.spec_url !== undefined) ctx.addIssue({ code: 'custom', path: ['spec_url'], message: 'give spec or spec_url, not both' });
  });

export type CreateServiceInput = z.infer<typeof createServiceSchema>;
