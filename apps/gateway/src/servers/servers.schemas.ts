import { z } from 'zod';

/** Names are what the model uses (`vps_run server=...`): short, no spaces. */
export const serverName = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'letters, digits, dot, dash and underscore, starting with a letter or digit');

const host = z
  .string()
  .trim()
  .min(1)
  .max(253)
  .regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9][A-Za-z0-9.:-]*)$/, 'a host name or an IP address');

const username = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9._][A-Za-z0-9._-]*$/, 'a user name');

const privateKey = z
  .string()
  .min(1)
  .max(16_384)
  .refine((k) => /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/.test(k), 'a PEM or OpenSSH private key (-----BEGIN ... PRIVATE KEY-----)');

const credentialFields = {
  private_key: privateKey.optional(),
  passphrase: z.string().min(1).max(1024).optional(),
  password: z.string().min(1).max(1024).optional(),
};

export const createServerSchema = z
  .object({
    name: serverName,
    host,
    port: z.number().int().min(1).max(65535).default(22),
    username,
    ...credentialFields,
  })
  .strict()
  .superRefine(oneCredential(true));

export const updateServerSchema = z
  .object({
    name: serverName.optional(),
    host: host.optional(),
    port: z.number().int().min(1).max(65535).optional(),
    username: username.optional(),
    ...credentialFields,
  })
  .strict()
  .superRefine(oneCredential(false));

export const repinSchema = z
  .object({
    /** The fingerprint the tenant checked (as the refusal named it); omit to pin whatever the server presents next. */
    fingerprint: z.string().regex(/^SHA256:[A-Za-z0-9+/]{43}$/, 'SHA256:<43 base64 characters>, as the refusal named it').optional(),
  })
  .strict();

export type CreateServerInput = z.infer<typeof createServerSchema>;
export type UpdateServerInput = z.infer<typeof updateServerSchema>;

/** Exactly one of a private key (with its optional passphrase) or a password. */
function oneCredential(required: boolean) {
  return (v: { private_key?: string; passphrase?: string; password?: string }, ctx: z.RefinementCtx) => {
    if (v.private_key && v.password) ctx.addIssue({ code: 'custom', path: ['password'], message: 'give a private_key or a password, not both' });
    if (v.passphrase && !v.private_key) ctx.addIssue({ code: 'custom', path: ['passphrase'], message: 'a passphrase goes with a private_key' });
    if (required && !v.private_key && !v.password) ctx.addIssue({ code: 'custom', path: ['private_key'], message: 'a private_key or a password is required' });
  };
}

/** A session's backend, as a tenant may choose it: only a saved server; docker and local are the deployment's choice. */
export const sessionBackendSchema = z
  .object({
    type: z.literal('ssh', { error: 'only "ssh" (one of your saved servers) can be chosen; docker or local is the deployment\'s choice' }),
    server: serverName,
  })
  .strict();
