import { z } from 'zod';
import { ToolDefinition } from '../tool-definition';

export const TERMINAL_TOOL: ToolDefinition = {
  name: 'terminal',
  description:
    'Run a shell command in the session sandbox. The shell state persists between calls (cd, exported variables, activated environments). A command still running after max_wait_ms becomes a background job: you get its pid and files to check later; stop it with `kill -- -<pid>`. Use read_file/edit_file/grep for files rather than cat/sed/grep.',
  parameters: z
    .object({
      command: z.string().min(1).max(100_000),
      timeout_seconds: z
        .number()
        .int()
        .min(1)
        .max(900)
        .optional()
        .describe(
          'Kill the command if it is still running after this many seconds while the call waits for it (default 120, max 900). It only applies when it is shorter than max_wait_ms: a command that outlives max_wait_ms becomes a background job, and background jobs are never killed by a timeout.',
        ),
      max_wait_ms: z
        .number()
        .int()
        .optional()
        .describe(
          'Wait this long for the command before returning a background job handle (default 10000, clamped to 250..600000). Raise it above timeout_seconds*1000 for a long command that must be killed at its timeout; use a short window such as 250 for servers.',
        ),
    })
    .strict(),
  mutating: true,
  toolsets: ['coding'],
  runsIn: 'sandbox',
  timeoutSeconds: 120,
};
