import pino, { Logger } from 'pino';
import { redactSecrets } from './redact-secrets';
import { currentRequestId } from './request-id';

/**
 * Field paths that may hold a secret. pino replaces them with "[redacted]" before a line
 * is written, whatever logged them.
 */
export const REDACTED_PATHS = [
  'authorization',
  '*.authorization',
  'headers.authorization',
  'req.headers.authorization',
  'req.headers["x-admin-token"]',
  'apiKey',
  '*.apiKey',
  'api_key',
  '*.api_key',
  'key',
  '*.key',
  'token',
  '*.token',
  'password',
  '*.password',
  'privateKey',
  '*.privateKey',
  'private_key',
  '*.private_key',
  'RUNBOX_ADMIN_TOKEN',
  'RUNBOX_MODEL_API_KEY',
  'RUNBOX_EMBEDDINGS_API_KEY',
];

export interface LoggerOptions {
  service: string;
  level?: string;
  /** Where lines go; tests pass a stream to capture them. Defaults to `file`, then stdout. */
  destination?: pino.DestinationStream;
  /** Append lines to this file (written synchronously, so nothing is lost at exit). */
  file?: string;
  /** Values that must never be written, wherever they appear in a line. */
  secrets?: readonly string[];
}

export function createLogger({ service, level = 'info', destination, file, secrets = [] }: LoggerOptions): Logger {
  const target = destination ?? (file ? pino.destination({ dest: file, append: true, mkdir: true, sync: true }) : pino.destination({ sync: false }));
  return pino(
    {
      level,
      base: { service },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      hooks: { streamWrite: (line) => redactSecrets(line, secrets) },
      timestamp: pino.stdTimeFunctions.isoTime,
      // The correlation id of the request being served, whoever logs: one grep finds a
      // request's lines in the gateway and in the executor that ran its tool calls.
      mixin: () => {
        const requestId = currentRequestId();
        return requestId ? { request_id: requestId } : {};
      },
    },
    target,
  );
}

export type { Logger };
