import { z } from 'zod';
import { ToolDefinition } from '../tool-definition';

const path = z.string().min(1).max(4096).describe('Path relative to /workspace (an absolute path inside /workspace also works).');
const pageArgs = {
  offset: z.number().int().min(0).optional().describe('Skip this many entries; use the next_offset a previous page gave.'),
};

export const FILE_TOOLS: ToolDefinition[] = [
  {
    name: 'read_file',
    description:
      'Read a text file from the workspace. Returns a header `<path> — lines A-B of N`, a blank line, then the bytes verbatim (nothing is added to lines, so any region can be used as an edit_file anchor). Use offset/limit for large files; images return format and size; PDFs return text for a page range. Prefer this over terminal `cat`.',
    parameters: z
      .object({
        path,
        offset: z.number().int().min(1).optional().describe('First line to read (1-based).'),
        limit: z.number().int().min(1).max(100000).optional().describe('How many lines to read (default 2000).'),
        pages: z.string().max(32).optional().describe('For PDFs: a page range such as "1-3".'),
      })
      .strict(),
    mutating: false,
    toolsets: ['minimal', 'coding', 'research', 'browser'],
    runsIn: 'sandbox',
    pathArgument: 'path',
    timeoutSeconds: 60,
  },
  {
    name: 'write_file',
    description: 'Create a file or overwrite it entirely, making parent folders. For a change inside an existing file use edit_file instead.',
    parameters: z.object({ path, content: z.string().max(50_000_000) }).strict(),
    mutating: true,
    toolsets: ['coding', 'browser'],
    runsIn: 'sandbox',
    pathArgument: 'path',
    timeoutSeconds: 60,
  },
  {
    name: 'edit_file',
    description:
      'Replace an exact string in a file. old_string must match byte for byte and occur exactly once (unless replace_all). If it is not found, read the file again rather than adding context; if it matches several places, add surrounding context.',
    parameters: z
      .object({
        path,
        old_string: z.string().min(1),
        new_string: z.string(),
        replace_all: z.boolean().optional(),
      })
      .strict(),
    mutating: true,
    toolsets: ['coding'],
    runsIn: 'sandbox',
    pathArgument: 'path',
    timeoutSeconds: 60,
  },
  {
    name: 'list_files',
    description: 'List a folder of the workspace (folders end with /). recursive lists the whole tree. Use glob to find files by name pattern.',
    parameters: z.object({ path: path.optional(), recursive: z.boolean().optional() }).strict(),
    mutating: false,
    toolsets: ['minimal', 'coding'],
    runsIn: 'sandbox',
    timeoutSeconds: 60,
  },
  {
    name: 'glob',
    description:
      'Find files by glob pattern (e.g. `src/**/*.ts`), newest first (sort: "path" for path order). Pages of head_limit entries; continue with the next_offset the footer gives.',
    parameters: z
      .object({
        pattern: z.string().min(1).max(4096),
        path: path.optional(),
        sort: z.enum(['mtime', 'path']).optional(),
        head_limit: z.number().int().min(0).optional().describe('Entries per page (default 100; 0 = no count cap).'),
        ...pageArgs,
      })
      .strict(),
    mutating: false,
    toolsets: ['coding'],
    runsIn: 'sandbox',
    timeoutSeconds: 60,
  },
  {
    name: 'grep',
    description:
      'Search file contents with a ripgrep regular expression. output_mode: files_with_matches (default), count, or content (path:line:text). Searches files up to 8 MB. Prefer this over terminal grep.',
    parameters: z
      .object({
        pattern: z.string().min(1).max(10_000),
        path: path.optional(),
        glob: z.string().min(1).max(4096).optional(),
        output_mode: z.enum(['files_with_matches', 'count', 'content']).optional(),
        case_insensitive: z.boolean().optional(),
        head_limit: z.number().int().min(0).optional().describe('Entries per page (default 250; 0 = no count cap).'),
        ...pageArgs,
      })
      .strict(),
    mutating: false,
    toolsets: ['minimal', 'coding', 'research'],
    runsIn: 'sandbox',
    timeoutSeconds: 60,
  },
];
