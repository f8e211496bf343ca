import { z } from 'zod';

const port = z.coerce.number().int().min(0).max(65535);
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v));
const credentialsKey = z
  .string()
  .refine((v) => Buffer.from(v, 'base64').length === 32, 'a key is 32 random bytes in base64 (openssl rand -base64 32)');
/** A comma-separated list; unset or empty is undefined (read it with `?? []`). */
const commaList = z
  .string()
  .optional()
  .transform((v) => {
    const items = (v ?? '').split(',').map((s) => s.trim()).filter(Boolean);
    return items.length ? items : undefined;
  });
/** The servers of a NATS_URL value: comma-separated, blanks dropped. */
export function natsServerList(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

function isNatsServer(server: string): boolean {
  try {
    const url = new URL(server.includes('://') ? server : `nats://${server}`);
    return ['nats:', 'tls:', 'ws:', 'wss:'].includes(url.protocol) && url.hostname !== '';
  } catch {
    return false;
  }
}

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
  /**
   * Tenant work: a role that neither owns the tables nor bypasses row-level security
   * (runbox_app). The services refuse to start on an owner or superuser connection.
   */
  DATABASE_URL: z.string().url().default('postgresql://runbox_app:runbox_app@127.0.0.1:5432/runbox'),
  /** Deployment-wide work (key lookup, admin, sweeps across tenants): role runbox_system. */
  SYSTEM_DATABASE_URL: z.string().url().default('postgresql://runbox_system:runbox_system@127.0.0.1:5432/runbox'),
  /**
   * Connections a process keeps at most for tenant work. Unset, a gateway sizes it from its
   * run workers and an executor keeps 10 (databasePoolSizes).
   */
  DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(1000).optional(),
  /** Connections a process keeps at most for deployment-wide work. */
  DATABASE_SYSTEM_POOL_SIZE: z.coerce.number().int().min(1).max(1000).default(4),
  /**
   * One NATS server, or a comma-separated list of a cluster's servers: the client connects to
   * any of them and reconnects across them when one goes away.
   */
  NATS_URL: z
    .string()
    .default('nats://127.0.0.1:4222')
    .refine((v) => natsServerList(v).length > 0 && natsServerList(v).every(isNatsServer), 'must be a NATS URL (nats://host:port) or a comma-separated list of them'),
  /**
   * Copies of the run queue's stream a NATS cluster keeps (1 on a single server, 3 in a
   * three-node cluster); an existing stream with another count is changed to this one.
   */
  RUNBOX_NATS_STREAM_REPLICAS: z.coerce.number().int().min(1).max(5).default(1),
  RUNBOX_ADMIN_TOKEN: optionalString,
  RUNBOX_MODEL_BASE_URL: optionalString.pipe(z.string().url().optional()),
  RUNBOX_MODEL_API_KEY: optionalString,
  RUNBOX_MODEL: optionalString,
  /** `openai` (chat completions) or `anthropic` (Messages API). */
  RUNBOX_MODEL_PROVIDER: z.enum(['openai', 'anthropic']).default('openai'),
  RUNBOX_MODEL_TIMEOUT_MS: z.coerce.number().int().positive().default(120_000),
  /** Stream chat completions (OpenAI-compatible providers) and emit `message.delta` events. */
  RUNBOX_MODEL_STREAM: flag,
  /** `max_tokens` for providers that require it (Anthropic Messages). */
  RUNBOX_MODEL_MAX_TOKENS: z.coerce.number().int().positive().default(4096),
  /** An approval nobody decides within this many seconds is denied (a run's limits may override it). */
  RUNBOX_APPROVAL_TIMEOUT_SECONDS: z.coerce.number().int().positive().default(1800),
  /** A gateway worker's claim on a run lasts this long without a heartbeat; then another replica resumes it. */
  RUNBOX_RUN_LEASE_SECONDS: z.coerce.number().int().min(2).max(600).default(30),
  /** How often each gateway looks for expired approvals and runs that lost their worker. */
  RUNBOX_RUN_SWEEP_SECONDS: z.coerce.number().positive().max(3600).default(5),
  /** Runs one gateway replica executes at the same time (more wait on the queue). */
  RUNBOX_RUN_WORKERS: z.coerce.number().int().min(1).max(1000).default(32),
  /**
   * Characters of tool results one model request carries in full, newest first; older
   * results are sent cut to their first 2,000 characters (never cut where they are stored).
   */
  RUNBOX_CONTEXT_BUDGET_CHARS: z.coerce.number().int().min(1_000).max(10_000_000).default(200_000),
  /**
   * How many levels of sub-runs (delegate_task) may nest below a run a client made: with 2,
   * a run's sub-run may delegate once more and that one may not. 0 turns delegation off.
   */
  RUNBOX_DELEGATE_MAX_DEPTH: z.coerce.number().int().min(0).max(10).default(2),
  /**
   * Embeddings for rag_search (optional): a model name turns them on. The base URL defaults to
   * the chat model's; so does the key, but only when the base URL is unset too.
   */
  RUNBOX_EMBEDDINGS_MODEL: optionalString,
  RUNBOX_EMBEDDINGS_BASE_URL: optionalString.pipe(z.string().url().optional()),
  RUNBOX_EMBEDDINGS_API_KEY: optionalString,
  /**
   * Private hosts outbound tools may reach anyway (web_fetch, browser, ...): comma-separated
   * `host:port` (port may be `*`; IPv6 as `[addr]:port`), matched against the URL's host and
   * against the address it resolves to. For intranets and tests.
   */
  RUNBOX_ALLOW_PRIVATE_HOSTS: optionalString
    .transform((v) => v?.split(',').map((s) => s.trim()).filter((s) => s !== ''))
    .pipe(z.array(z.string().regex(/^(\[[^\]]+\]|[^:\s]+):(\d{1,5}|\*)$/, 'each entry must be host:port')).optional()),
  /** web_search's provider; unset, web_search is not offered. */
  RUNBOX_WEB_SEARCH_PROVIDER: z.enum(['searxng', 'brave', 'tavily', 'exa']).optional(),
  /** The provider's endpoint, in place of its public one (SearXNG has none: set it). */
  RUNBOX_WEB_SEARCH_URL: optionalString.pipe(z.string().url().optional()),
  RUNBOX_WEB_SEARCH_API_KEY: optionalString,
  /** Chromium for the browser tool; unset, the usual install paths are tried. */
  RUNBOX_BROWSER_EXECUTABLE: optionalString,
  /** A session's browser context is closed after this long without a browser call. */
  RUNBOX_BROWSER_IDLE_SECONDS: z.coerce.number().int().positive().default(600),
  /** Open tabs per session's browser context. */
  RUNBOX_BROWSER_MAX_PAGES: z.coerce.number().int().min(1).max(100).default(8),
  /** JavaScript heap a session's pages may use together; past it the context is closed. */
  RUNBOX_BROWSER_MAX_HEAP_MB: z.coerce.number().int().positive().default(512),
  RUNBOX_SANDBOX_IMAGE: z.string().default('runbox-sandbox:latest'),
  /**
   * Tenants with a label of their own in the gateway's per-tenant metrics: the first this
   * many a gateway process counts; the rest are counted together as `other`.
   */
  RUNBOX_METRICS_TENANT_LABELS: z.coerce.number().int().min(0).max(1000).default(20),
  RUNBOX_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Append log lines to this file instead of stdout. */
  RUNBOX_LOG_FILE: optionalString,
  /** How long the gateway waits for an executor to answer a tool call beyond the tool's own timeout. */
  RUNBOX_EXECUTOR_GRACE_MS: z.coerce.number().int().positive().default(15_000),
  /** A stable name for this executor; sessions are pinned to the executor that created their sandbox. */
  RUNBOX_EXECUTOR_ID: optionalString,
  /** The executor's own HTTP port: GET /healthz, /readyz and /metrics (0: any free port). */
  RUNBOX_EXECUTOR_HTTP_PORT: port.default(8081),
  /** Sandboxes one executor holds at most; a new session beyond it is placed on another executor. */
  RUNBOX_EXECUTOR_MAX_SANDBOXES: z.coerce.number().int().min(1).max(100_000).default(100),
  /** How often an executor announces itself; a gateway counts it lost after three silent intervals. */
  RUNBOX_EXECUTOR_HEARTBEAT_SECONDS: z.coerce.number().min(0.05).max(60).default(2),
  /** How long a lost executor's sessions wait for it to come back before RUNBOX_ON_EXECUTOR_LOSS applies. */
  RUNBOX_EXECUTOR_LOSS_GRACE_SECONDS: z.coerce.number().min(0).max(86_400).default(60),
  /** What a session whose executor stayed lost gets: `fail` (its calls fail) or `recreate` (a new, empty sandbox elsewhere). */
  RUNBOX_ON_EXECUTOR_LOSS: z.enum(['fail', 'recreate']).default('fail'),
  /** The executor's Docker engine (`unix:///path/docker.sock`, or `tcp://host:port`); unset, the local default socket. */
  DOCKER_HOST: optionalString.pipe(z.string().regex(/^(unix:\/\/\/|tcp:\/\/)/, 'must be unix:///path or tcp://host:port').optional()),
  RUNBOX_SANDBOX_MEMORY_MB: z.coerce.number().int().positive().default(1024),
  RUNBOX_SANDBOX_CPUS: z.coerce.number().positive().default(1),
  RUNBOX_SANDBOX_PIDS: z.coerce.number().int().positive().default(512),
  /**
   * Size of each session's /workspace in MiB, enforced by the kernel (an ext4 image on a loop
   * device per workspace volume). 0 runs without a limit: an explicit operator choice.
   */
  RUNBOX_SANDBOX_DISK_MB: z.coerce
    .number()
    .int()
    .min(0)
    .refine((mb) => mb === 0 || mb >= 16, 'must be 0 (no limit) or at least 16 (a smaller ext4 has no room for its journal)')
    .default(2048),
  /** Give sandboxes a network (bridge). Off by default: containers see only loopback. */
  RUNBOX_SANDBOX_NETWORK: flag,
  /**
   * How long a tool call waits for its session's sandbox to start (a cold container on a busy
   * host) before it is answered "not ready yet, nothing ran"; the tool's own time limit
   * starts once the sandbox is ready. Three minutes: 32 sandboxes started at once on two
   * cores took up to a minute; an engine that makes none in three is reported as broken.
   */
  RUNBOX_SANDBOX_START_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(3600).default(180),
  RUNBOX_SANDBOX_IDLE_TTL_SECONDS: z.coerce.number().int().positive().default(1800),
  RUNBOX_SANDBOX_SWEEP_SECONDS: z.coerce.number().int().positive().default(60),
  RUNBOX_SANDBOX_KEEP_VOLUME_ON_IDLE: flag.default(true),
  /** Warm containers kept ready even when no session is being created (lowered to the max when above it). */
  RUNBOX_WARM_POOL_MIN: z.coerce.number().int().min(0).max(256).default(2),
  /** The most warm containers the pool grows to while sessions are created faster than it refills; 0 turns it off. */
  RUNBOX_WARM_POOL_MAX: z.coerce.number().int().min(0).max(256).default(32),
  /** After this long with no session taking a warm container, the pool halves toward its minimum. */
  RUNBOX_WARM_POOL_IDLE_SECONDS: z.coerce.number().positive().max(86_400).default(60),
  /** A pool of exactly this many (minimum and maximum both), 0 = no pool; unset, the two above apply. */
  RUNBOX_WARM_POOL_SIZE: z.preprocess((v) => (typeof v === 'string' && v.trim() === '' ? undefined : v), z.coerce.number().int().min(0).max(256).optional()),
  /** Allow the `local` terminal backend (no isolation). For development only. */
  RUNBOX_UNSAFE_LOCAL_BACKEND: flag,
  /** Where sessions' sandbox tools run: `docker`, or `local` (needs RUNBOX_UNSAFE_LOCAL_BACKEND). */
  RUNBOX_SANDBOX_BACKEND: z.enum(['docker', 'local']).default('docker'),
  RUNBOX_LOCAL_WORKSPACES: z.string().default('.runbox/workspaces'),
  RUNBOX_FILE_SEARCH_TIMEOUT: z.coerce.number().int().positive().default(20),
  /** stdio MCP server processes one session's sandbox may run at once (docs/mcp.md). */
  RUNBOX_MCP_STDIO_MAX_PROCESSES: z.coerce.number().int().min(1).max(64).default(4),
  /** A stdio MCP server process nobody read from or wrote to for this long is stopped. */
  RUNBOX_MCP_STDIO_IDLE_SECONDS: z.coerce.number().int().positive().default(600),
  /** Largest file a PUT /v1/sessions/{id}/files/... takes, and bytes a tar import may unpack (docs/files-api.md). */
  RUNBOX_FILES_MAX_BYTES: z.coerce.number().int().positive().default(268_435_456),
  RUNBOX_MAX_BODY_BYTES: z.coerce.number().int().positive().default(1_048_576),
  /** Deepest nesting of arrays and objects a JSON body may have. */
  RUNBOX_MAX_JSON_DEPTH: z.coerce.number().int().min(2).max(1000).default(32),
  /** Longest string (key or value) a JSON body may hold, in characters. */
  RUNBOX_MAX_JSON_STRING_CHARS: z.coerce.number().int().positive().default(524_288),
  /** Seals saved servers' credentials (AES-256-GCM). Unset: the servers API and vps_* tools are off. */
  RUNBOX_CREDENTIALS_KEY: optionalString.pipe(credentialsKey.optional()),
  /** Older keys, comma-separated, that still open credentials during a rotation (docs/servers.md). */
  RUNBOX_CREDENTIALS_PREVIOUS_KEYS: commaList.pipe(z.array(credentialsKey).optional()),
});

export type RunboxConfig = z.infer<typeof configSchema>;

/** Every configured value that must never appear in a log line or an error body. */
export function configSecrets(config: RunboxConfig): string[] {
  const passwords = [config.DATABASE_URL, config.SYSTEM_DATABASE_URL].map((url) => {
    try {
      const { username, password } = new URL(url);
      // A development password that is the role's own name is no secret, and hiding it
      // would hide the role name from every message that mentions it.
      return password === username ? '' : decodeURIComponent(password);
    } catch {
      return '';
    }
  });
  return [config.RUNBOX_ADMIN_TOKEN, config.RUNBOX_MODEL_API_KEY, config.RUNBOX_WEB_SEARCH_API_KEY, config.RUNBOX_CREDENTIALS_KEY, ...(config.RUNBOX_CREDENTIALS_PREVIOUS_KEYS ?? []), ...passwords].filter((s): s is string => !!s);
}
