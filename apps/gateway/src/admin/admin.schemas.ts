import { domainRulesSchema } from '@app/egress';
import { z } from 'zod';
import { tenantLimitsPatchSchema, tenantLimitsSchema } from '../quotas/tenant-limits';
import { runDefaultsSchema } from '../runs/run-defaults';

export { tenantLimitsSchema };

export const createTenantSchema = z
  .object({
    name: z.string().trim().min(1).max(100).regex(/^[A-Za-z0-9][A-Za-z0-9 ._-]*$/, 'letters, digits, space, . _ -'),
    limits: tenantLimitsSchema.optional(),
  })
  .strict();

export const listTenantsQuerySchema = z.object({ limit: z.coerce.number().int().min(1).max(1000).default(100) }).strict();

/** `run_defaults` replaces the saved defaults as a whole; null clears them. */
const runDefaultsPatch = runDefaultsSchema.nullable();

/** Tool names that need approval in every run of the tenant; the controller checks each is a known tool. */
const approvalRequired = z.array(z.string().min(1).max(128)).max(200);

export const updateTenantSchema = z
  .object({
    limits: tenantLimitsPatchSchema.optional(),
    run_defaults: runDefaultsPatch.optional(),
    egress: domainRulesSchema.optional(),
    approval_required: approvalRequired.optional(),
    /** Lets the browser tool run script in the tenant's pages (its evaluate action). */
    browser_evaluate: z.boolean().optional(),
  })
  .strict()
  .refine(
    (body) =>
      body.limits !== undefined ||
      body.run_defaults !== undefined ||
      body.egress !== undefined ||
      body.approval_required !== undefined ||
      body.browser_evaluate !== undefined,
    { message: 'give limits, run_defaults, egress, approval_required, browser_evaluate or any of them together' },
  )
  // The refinement above, as JSON Schema says it (route catalogues and the fuzz read it).
  .meta({ minProperties: 1 });

export const updateApiKeySchema = z.object({ run_defaults: runDefaultsPatch }).strict();

export const createApiKeySchema = z.object({ name: z.string().trim().min(1).max(100).optional() }).strict();
