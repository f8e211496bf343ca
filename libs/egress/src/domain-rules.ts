import { z } from 'zod';

/**
 * A tenant's egress rules (PATCH /v1/admin/tenants/{id} with `egress`): an entry names a
 * domain and covers its subdomains (`example.com` admits `docs.example.com`); a leading
 * `*.` is accepted and means the same. Deny wins; a non-empty allow list admits only what
 * it names. Empty lists: every public host.
 */
export interface DomainRules {
  allow: string[];
  deny: string[];
}

export const NO_DOMAIN_RULES: DomainRules = { allow: [], deny: [] };

const domainEntry = z
  .string()
  .trim()
  .toLowerCase()
  .min(1)
  .max(253)
  .regex(/^(\*\.)?[a-z0-9_]([a-z0-9_.:-]*[a-z0-9_])?$/, 'a domain like example.com or *.example.com, or an IP address')
  .transform((d) => d.replace(/^\*\./, ''));

/** The shape the admin API accepts and Postgres stores. */
export const domainRulesSchema = z
  .object({
    allow: z.array(domainEntry).max(1000).default([]),
    deny: z.array(domainEntry).max(1000).default([]),
  })
  .strict();

export type DomainVerdict = 'allowed' | 'denied' | 'not_allowed';

export function matchDomainRules(hostname: string, rules: DomainRules): DomainVerdict {
  const covers = (entry: string) => hostname === entry || hostname.endsWith(`.${entry}`);
  if (rules.deny.some(covers)) return 'denied';
  if (rules.allow.length > 0 && !rules.allow.some(covers)) return 'not_allowed';
  return 'allowed';
}
