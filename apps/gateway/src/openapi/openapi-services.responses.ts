import { z } from 'zod';
import { listOf, timestamp } from '../api-docs/api-operation';
import { ServiceView } from './openapi-services.service';

/** An OpenAPI service as the API shows it: the kind of its credential, never the credential. */
export const openApiServiceSchema = z.object({
  id: z.string(),
  name: z.string(),
  title: z.string(),
  spec_url: z.string().nullable(),
  server: z.string(),
  auth: z.object({ type: z.string() }).nullable(),
  tools: z.array(z.object({ name: z.string(), operation_id: z.string(), method: z.string(), path: z.string(), mutating: z.boolean() })),
  created_at: timestamp(),
}).meta({ id: 'OpenApiService' }) satisfies z.ZodType<ServiceView>;
export const openApiServiceListSchema = listOf(openApiServiceSchema);
export const createdOpenApiServiceSchema = openApiServiceSchema.extend({
  skipped: z.array(z.object({ operation: z.string(), reason: z.string() })).describe('operations of the document that did not become tools, and why'),
});
