/**
 * Skills shipped with Runbox: read-only, listed for every tenant beside its own. Kept as
 * code rather than files so the build needs no asset copying.
 */
export interface BuiltinSkill {
  name: string;
  content: string;
}

export const BUILTIN_SKILLS: BuiltinSkill[] = [
  {
    name: 'background-jobs',
    content: `# Background jobs in the sandbox terminal
Run servers, watchers and long builds without blocking, and check on them later.

1. Start it with a short wait: \`terminal\` with \`max_wait_ms: 250\` (do not append \`&\`).
   A command still running after the wait becomes a background job; the result gives its
   job id, pid, and files under \`/workspace/.runbox/jobs/<id>/\`.
2. Check progress with \`read_file\` on \`status.json\` (running or exited, exit code) and on
   \`stdout.txt\` / \`stderr.txt\` (use offset to read only new lines).
3. Stop it with \`kill -- -<pid>\`: the minus sign signals the whole process group, so
   children die too. An exit code of 128+N means signal N (143 = SIGTERM, 137 = SIGKILL).
4. For a server, poll until it answers (\`curl -sf localhost:PORT\`) instead of sleeping a
   fixed time.
`,
  },
  {
    name: 'editing-files',
    content: `# Editing files reliably
Make edits that land where you meant, first time.

- Read before you edit: \`read_file\` shows the bytes verbatim under a header line; copy the
  anchor for \`edit_file\` from there, never from a line starting with "…" (those are notes).
- \`old_string\` must match exactly once. Not found means your copy is stale: read the file
  again. Found several times: add neighbouring lines, or set \`replace_all\` on purpose.
- Use \`write_file\` only to create a file or replace all of it.
- Several edits to one file in a turn run in order, each on the previous result.
- After editing code, run its tests or at least a syntax check with \`terminal\`.
`,
  },
  {
    name: 'knowledge-tools',
    content: `# Remembering and finding things
Choose the right store for what you learn, and look there before asking the user.

- \`memory\` keeps short, self-contained facts across sessions ("The staging database is
  db-stg-2; deploys need a ticket id"). Save one fact per call, phrased to make sense with no
  context. Search it at the start of work that may depend on earlier decisions. Delete facts
  that turn out wrong.
- \`session_search\` finds what was said in earlier conversations: use it when the user
  refers to past work. Each hit names its session and run.
- \`rag_index\` + \`rag_search\` are for a body of documents or code in the workspace:
  index the folder once (again after big changes), then ask questions; each hit has a path
  and line range to open with \`read_file\`.
- \`grep\` beats \`rag_search\` for an exact identifier or error message.
`,
  },
  {
    name: 'writing-skills',
    content: `# Writing a skill
How to add a reusable procedure to this tenant's skill library with the skill tool.

A skill is a short Markdown document an agent reads before doing a kind of task.

1. Name it in lowercase with dashes (\`release-checklist\`); the name is how it is found.
2. Start with a \`# Title\` line, then one sentence saying when to use it: the library
   lists that sentence as the description.
3. Give the steps as a numbered list, with exact commands and paths where they matter,
   and the checks that tell the reader a step worked.
4. Keep it under a page; link to files in the workspace for details.
5. Save it with \`skill\` action \`write\`; writing the same name again replaces it.
   Built-in skills cannot be overwritten: use another name.
`,
  },
];

/** The line that says what a skill is for: a `description:` line, else the first line that is not a heading. */
export function describeSkill(content: string): string {
  const lines = content.split('\n').map((l) => l.trim());
  const explicit = lines.find((l) => /^description:/i.test(l));
  const line = explicit ? explicit.replace(/^description:\s*/i, '') : (lines.find((l) => l && !l.startsWith('#') && l !== '---') ?? '');
  return line.length > 200 ? `${line.slice(0, 199)}…` : line;
}
