import { configSchema, RunboxConfig } from './config.schema';

export class ConfigError extends Error {}

/** Parses the environment; throws one error naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): RunboxConfig {
  const parsed = configSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new ConfigError(`invalid configuration: ${problems}`);
  }
  const conflict = crossFieldProblem(parsed.data);
  if (conflict) throw new ConfigError(`invalid configuration: ${conflict}`);
  return parsed.data;
}

/** Rules that tie two variables together. */
function crossFieldProblem(config: RunboxConfig): string | undefined {
  if (config.RUNBOX_SANDBOX_BACKEND === 'local' && !config.RUNBOX_UNSAFE_LOCAL_BACKEND) {
    return 'RUNBOX_SANDBOX_BACKEND=local runs tools on the host without isolation; it also needs RUNBOX_UNSAFE_LOCAL_BACKEND=1';
  }
  return undefined;
}
