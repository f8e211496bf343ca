import { z } from 'zod';

const port = z.coerce.number().int().min(0).max(65535);
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v));
const flag = z
  .enum(['0', '1', 'true', 'false', ''])
  .optional()
  .transform((v) => v === '1' || v === 'true');

/**
 * Every setting Runbox reads from the environment, parsed once at start-up. Nothing else
 * reads process.env: a typo or a bad value stops the service with a message naming it.
 */
export const configSchema = z.object({
  PORT: port.default(8080),
  DATABASE_URL: z.string().url().default('postgresql://runbox:runbox@127.0.0.1:5432/runbox'),
  NATS_URL: z.string().default('nats://127.0.0.1:4222'),
  RUNBOX_ADMIN_TOKEN: optionalString,
  RUNBOX_MODEL_BASE_URL: optionalString.pipe(z.string().url().optional()),
  RUNBOX_MODEL_API_KEY: optionalString,
  RUNBOX_MODEL: optionalString,
  /** `openai` (chat completions) or `anthropic` (Messages API). */
  RUNBOX_MODEL_PROVIDER: z.enum(['openai', 'anthropic']).default('openai'),
  RUNBOX_MODEL_TIMEOUT_MS: z.coerce.number().int().positive().default(120_000),
  RUNBOX_SANDBOX_IMAGE: z.string().default('runbox-sandbox:latest'),
  RUNBOX_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** How long the gateway waits for an executor to answer a tool call beyond the tool's own timeout. */
  RUNBOX_EXECUTOR_GRACE_MS: z.coerce.number().int().positive().default(15_000),
  /** A stable name for this executor; sessions are pinned to the executor that created their sandbox. */
  RUNBOX_EXECUTOR_ID: optionalString,
  RUNBOX_SANDBOX_MEMORY_MB: z.coerce.number().int().positive().default(1024),
  RUNBOX_SANDBOX_CPUS: z.coerce.number().positive().default(1),
  RUNBOX_SANDBOX_PIDS: z.coerce.number().int().positive().default(512),
  /** Give sandboxes a network (bridge). Off by default: containers see only loopback. */
  RUNBOX_SANDBOX_NETWORK: flag,
  RUNBOX_SANDBOX_IDLE_TTL_SECONDS: z.coerce.number().int().positive().default(1800),
  RUNBOX_SANDBOX_SWEEP_SECONDS: z.coerce.number().int().positive().default(60),
  RUNBOX_SANDBOX_KEEP_VOLUME_ON_IDLE: flag.default(true),
  RUNBOX_WARM_POOL_SIZE: z.coerce.number().int().min(0).max(64).default(0),
  /** Allow the `local` terminal backend (no isolation). For development only. */
  RUNBOX_UNSAFE_LOCAL_BACKEND: flag,
  /** Where sessions' sandbox tools run: `docker`, or `local` (needs RUNBOX_UNSAFE_LOCAL_BACKEND). */
  RUNBOX_SANDBOX_BACKEND: z.enum(['docker', 'local']).default('docker'),
  RUNBOX_LOCAL_WORKSPACES: z.string().default('.runbox/workspaces'),
  RUNBOX_FILE_SEARCH_TIMEOUT: z.coerce.number().int().positive().default(20),
  RUNBOX_MAX_BODY_BYTES: z.coerce.number().int().positive().default(1_048_576),
});

export type RunboxConfig = z.infer<typeof configSchema>;
