/**
 * Permission rules (seed 001): `allow`, `ask` and `deny` lists of matchers such as
 * `terminal`, `terminal(npm test *)`, `write_file(src/*)` or `mcp__github__*`. A matcher
 * names a tool (a `*` glob) and optionally a pattern for the call's subject: the command
 * of a terminal call, the path of a file tool, the url of a fetch. Deny wins over ask,
 * ask over allow; a call no rule matches is left to the run's approval mode.
 */
export type PermissionVerdict = 'allow' | 'ask' | 'deny';

export interface PermissionRules {
  allow?: string[];
  ask?: string[];
  deny?: string[];
}

export interface PermissionMatch {
  verdict: PermissionVerdict;
  rule: string;
}

export interface CallSubject {
  tool: string;
  /** What a `tool(pattern)` matcher is compared with; undefined when the tool has none. */
  subject?: string;
  /** The subject is a shell command: split it into simple commands before matching. */
  isShell?: boolean;
}

interface Matcher {
  text: string;
  tool: RegExp;
  subject?: RegExp;
}

const RULE_SHAPE = /^([A-Za-z0-9_*.-]+)(?:\(([\s\S]*)\))?$/;

/** Why a rule cannot be used, or undefined when it is well formed. */
export function ruleProblem(rule: string): string | undefined {
  const m = RULE_SHAPE.exec(rule.trim());
  if (!m) return 'expected a tool name, optionally followed by (pattern), e.g. terminal(npm test *)';
  if (m[2] !== undefined && m[2].trim() === '') return 'the pattern in parentheses is empty';
  return undefined;
}

export function evaluatePermissions(rules: PermissionRules | undefined, call: CallSubject): PermissionMatch | undefined {
  if (!rules) return undefined;
  for (const verdict of ['deny', 'ask'] as const) {
    for (const text of rules[verdict] ?? []) {
      const m = compile(text);
      if (m && matchesAnyPart(m, call)) return { verdict, rule: text };
    }
  }
  const allow = (rules.allow ?? []).map(compile).filter((m): m is Matcher => m !== undefined);
  const match = allowMatch(allow, call);
  return match ? { verdict: 'allow', rule: match } : undefined;
}

/** deny and ask: a rule that matches the whole command or any simple command in it. */
function matchesAnyPart(m: Matcher, call: CallSubject): boolean {
  if (!m.tool.test(call.tool)) return false;
  if (!m.subject) return true;
  if (call.subject === undefined) return false;
  const parts = call.isShell ? [call.subject, ...splitShell(call.subject)] : [call.subject];
  return parts.some((p) => m.subject!.test(p));
}

/**
 * allow: every simple command of a shell line must be allowed by some rule, and a line with
 * command substitution is never allowed by a pattern, so `npm test x && rm -rf ~` is not
 * let through by `terminal(npm test *)`.
 */
function allowMatch(matchers: Matcher[], call: CallSubject): string | undefined {
  const forTool = matchers.filter((m) => m.tool.test(call.tool));
  const whole = forTool.find((m) => !m.subject);
  if (whole) return whole.text;
  if (call.subject === undefined) return undefined;
  const patterned = forTool.filter((m) => m.subject);
  if (!call.isShell) return patterned.find((m) => m.subject!.test(call.subject!))?.text;
  if (/\$\(|`|<\(|>\(/.test(call.subject)) return undefined;
  const parts = splitShell(call.subject);
  if (parts.length === 0) return undefined;
  const used: string[] = [];
  for (const part of parts) {
    const m = patterned.find((p) => p.subject!.test(part));
    if (!m) return undefined;
    used.push(m.text);
  }
  return [...new Set(used)].join(', ');
}

/** Splits a shell line on `;`, `&`, `&&`, `||`, `|` and newlines outside quotes. */
export function splitShell(line: string): string[] {
  const parts: string[] = [];
  let current = '';
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      current += c;
      if (c === '\\' && quote === '"' && i + 1 < line.length) current += line[++i];
      else if (c === quote) quote = null;
      continue;
    }
    if (c === '\\' && i + 1 < line.length) {
      current += c + line[++i];
      continue;
    }
    if (c === '"' || c === "'") {
      quote = c;
      current += c;
      continue;
    }
    if (c === ';' || c === '&' || c === '|' || c === '\n') {
      parts.push(current);
      current = '';
      if ((c === '&' || c === '|') && line[i + 1] === c) i++;
      continue;
    }
    current += c;
  }
  parts.push(current);
  return parts.map((p) => p.trim()).filter((p) => p.length > 0);
}

function compile(text: string): Matcher | undefined {
  const m = RULE_SHAPE.exec(text.trim());
  if (!m) return undefined;
  return { text, tool: glob(m[1]), subject: m[2] === undefined ? undefined : glob(m[2].trim()) };
}

/**
 * `*` matches any run of characters (spaces and slashes included); everything else is
 * literal. A trailing ` *` also matches nothing, so `npm test *` covers a bare `npm test`.
 */
function glob(pattern: string): RegExp {
  const optionalTail = pattern.endsWith(' *');
  const body = optionalTail ? pattern.slice(0, -2) : pattern;
  const source = body.split('*').map(escapeRegExp).join('[\\s\\S]*');
  return new RegExp(`^${source}${optionalTail ? '(?: [\\s\\S]*)?' : ''}$`);
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
