import { z } from 'zod';
import { createRunSchema, RunOptions } from './run-options';

/**
 * Saved defaults for runs (seed 000's saved `tools.toolset` and per-platform toolsets): a
 * tenant and each of its API keys may carry them; `PATCH /v1/admin/tenants/{id}` and
 * `PATCH /v1/admin/api_keys/{id}` set them as `run_defaults`.
 */
export const runDefaultsSchema = createRunSchema
  .pick({ toolset: true, tools: true, enabled: true, disabled: true, approval_mode: true, permissions: true, limits: true })
  .strict();

export type RunDefaults = z.infer<typeof runDefaultsSchema>;

/** Where an effective option came from. */
export type OptionSource = 'run' | 'api_key' | 'tenant';

/** Per option, the layer that set it; `permissions.deny` lists every layer that added rules. */
export type OptionSources = Partial<Record<'toolset' | 'tools' | 'enabled' | 'disabled' | 'approval_mode' | 'limits' | 'permissions.allow' | 'permissions.ask', OptionSource>> & {
  'permissions.deny'?: OptionSource[];
};

interface Layer {
  source: OptionSource;
  values: RunDefaults;
}

/**
 * A run's effective options: run > API key > tenant, field by field, except that `toolset`
 * and `tools` replace each other as a pair (a run that names `tools` is not narrowed by a
 * saved toolset, nor the reverse), and permission deny rules accumulate: a run can add deny
 * rules, never drop one its key or tenant set.
 */
export function applyRunDefaults(
  request: RunOptions,
  apiKey: RunDefaults | null,
  tenant: RunDefaults | null,
): { options: RunOptions; sources: OptionSources } {
  const layers: Layer[] = [
    { source: 'run', values: request },
    { source: 'api_key', values: apiKey ?? {} },
    { source: 'tenant', values: tenant ?? {} },
  ];
  const options: RunOptions = { ...request };
  const sources: OptionSources = {};
  const first = <K extends keyof RunDefaults>(key: K) => layers.find((l) => l.values[key] !== undefined);

  const selection = layers.find((l) => l.values.toolset !== undefined || l.values.tools !== undefined);
  delete options.toolset;
  delete options.tools;
  if (selection) {
    if (selection.values.toolset !== undefined) {
      options.toolset = selection.values.toolset;
      sources.toolset = selection.source;
    }
    if (selection.values.tools !== undefined) {
      options.tools = selection.values.tools;
      sources.tools = selection.source;
    }
  }
  for (const key of ['enabled', 'disabled', 'approval_mode', 'limits'] as const) {
    const layer = first(key);
    if (!layer) continue;
    Object.assign(options, { [key]: layer.values[key] });
    sources[key] = layer.source;
  }
  const permissions = effectivePermissions(layers, sources);
  if (permissions) options.permissions = permissions;
  else delete options.permissions;
  return { options, sources };
}

function effectivePermissions(layers: Layer[], sources: OptionSources): RunOptions['permissions'] {
  const out: NonNullable<RunOptions['permissions']> = {};
  for (const kind of ['allow', 'ask'] as const) {
    const layer = layers.find((l) => l.values.permissions?.[kind] !== undefined);
    if (!layer) continue;
    out[kind] = layer.values.permissions?.[kind];
    sources[`permissions.${kind}`] = layer.source;
  }
  // Broadest first, so a reader sees the tenant's rules, then the key's, then the run's.
  const deny: string[] = [];
  const denySources: OptionSource[] = [];
  for (const layer of [...layers].reverse()) {
    const rules = layer.values.permissions?.deny;
    if (!rules?.length) continue;
    denySources.push(layer.source);
    for (const rule of rules) if (!deny.includes(rule)) deny.push(rule);
  }
  if (denySources.length > 0) {
    out.deny = deny;
    sources['permissions.deny'] = denySources;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/** Stored run defaults, validated again on the way out (a column edited by hand reads as none). */
export function parseStoredRunDefaults(value: unknown): RunDefaults | null {
  if (value === null || value === undefined) return null;
  const parsed = runDefaultsSchema.safeParse(value);
  return parsed.success ? parsed.data : null;
}
