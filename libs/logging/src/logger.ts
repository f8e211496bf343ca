import pino, { Logger } from 'pino';

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
  /** Where lines go; tests pass a stream to capture them. Defaults to stdout. */
  destination?: pino.DestinationStream;
}

export function createLogger({ service, level = 'info', destination }: LoggerOptions): Logger {
  return pino(
    {
      level,
      base: { service },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination ?? pino.destination({ sync: false }),
  );
}

export type { Logger };
