import { z } from 'zod';
import { ToolDefinition } from '../tool-definition';

export const TERMINAL_TOOL: ToolDefinition = {
  name: 'terminal',
  description:
    'Run a shell command in the session sandbox. The shell state persists between calls (cd, exported variables, activated environments). A command still running after max_wait_ms becomes a background job: you get its pid and files to check later; stop it with `kill -- -<pid>`. Use read_file/edit_file/grep for files rather than cat/sed/grep.',
  parameters: z
    .object({
      command: z.string().min(1).max(100_000),
      timeout_seconds: z.number().int().min(1).max(900).optional().describe('Kill the command after this many seconds (default 120).'),
      max_wait_ms: z.number().int().min(0).optional().describe('Wait this long before returning a background job handle (default 10000).'),
    })
    .strict(),
  mutating: true,
  toolsets: ['coding'],
  runsIn: 'sandbox',
  timeoutSeconds: 120,
};
