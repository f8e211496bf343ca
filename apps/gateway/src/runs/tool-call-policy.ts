import type { ToolDefinition } from '../tools/tool-definition';
import { evaluatePermissions, PermissionRules } from './permission-rules';

/**
 * What happens to one tool call the model made, decided before anything runs. The checks
 * go in this order, and the first that applies decides:
 *   1. hard stop: the run already made `hard_stop_after` calls;
 *   2. the tool is not offered to this run (toolset, enabled/disabled, allowlist);
 *   3. the arguments are not valid;
 *   4. repetition: the same call with the same arguments was made `repeat_limit` times in a row just before;
 *   5. permission rules: deny, then ask, then allow (an allow rule does not pass a tool the
 *      tenant's operator marked as needing approval: a run cannot switch that off);
 *   6. the approval mode: auto runs, deny refuses mutating tools, prompt asks for them. The
 *      tools the tenant marked count as mutating here.
 */
export type CallDecision =
  | { kind: 'run'; via: 'auto' | 'rule_allow' | 'read_only'; rule?: string }
  | { kind: 'ask'; reason: string; rule?: string }
  | { kind: 'refuse'; code: RefusalCode; message: string };

export type RefusalCode = 'hard_stop' | 'not_offered' | 'invalid_arguments' | 'repetition' | 'rule_deny' | 'mode_deny';

export interface CallFacts {
  /** The call's number in the run (1-based). */
  seq: number;
  name: string;
  /** Set when the arguments did not parse or validate: the message says why. */
  argumentProblem?: string;
  /** Tool name plus canonical arguments: equal keys mean the same call. */
  key: string;
  mutating: boolean;
  subject?: string;
  isShell?: boolean;
}

export interface PolicyContext {
  offered: ReadonlySet<string>;
  /** Tools the run's selection named but that it may not use here, with the reason (delegation depth). */
  withheld?: ReadonlyMap<string, string>;
  approvalMode: 'auto' | 'prompt' | 'deny';
  permissions?: PermissionRules;
  /** Tools the tenant's operator marked as needing approval: treated as mutating, whatever the run's rules say. */
  approvalRequired?: ReadonlySet<string>;
  hardStopAfter: number;
  repeatLimit: number;
  /** Keys of this run's earlier calls, oldest first. */
  earlierKeys: readonly string[];
}

export function decideCall(call: CallFacts, ctx: PolicyContext): CallDecision {
  if (call.seq > ctx.hardStopAfter) {
    return { kind: 'refuse', code: 'hard_stop', message: hardStopMessage(ctx.hardStopAfter) };
  }
  if (!ctx.offered.has(call.name)) {
    const offered = [...ctx.offered].sort().join(', ') || 'none';
    const why = ctx.withheld?.get(call.name);
    const what = why ? `tool ${call.name} is not available here: ${why}` : `tool ${call.name} is not available in this run`;
    return { kind: 'refuse', code: 'not_offered', message: `refused: ${what}, so nothing ran. The tools you can call are: ${offered}.` };
  }
  if (call.argumentProblem) {
    return { kind: 'refuse', code: 'invalid_arguments', message: `refused: ${call.argumentProblem}. Nothing ran; call it again with valid arguments.` };
  }
  const repeats = trailingRepeats(ctx.earlierKeys, call.key);
  if (repeats >= ctx.repeatLimit) {
    return {
      kind: 'refuse',
      code: 'repetition',
      message: `refused: you already made this exact call (${call.name} with the same arguments) ${repeats} times in a row, so it was not run again; repeating it will not change the result. Use the results you have, try something different, or finish.`,
    };
  }
  const rule = evaluatePermissions(ctx.permissions, { tool: call.name, subject: call.subject, isShell: call.isShell });
  if (rule?.verdict === 'deny') {
    return { kind: 'refuse', code: 'rule_deny', message: `refused: the permission rule deny ${rule.rule} forbids this call, so nothing ran.` };
  }
  if (rule?.verdict === 'ask') return { kind: 'ask', reason: `permission rule ask ${rule.rule}`, rule: rule.rule };
  const tenantRequired = ctx.approvalRequired?.has(call.name) ?? false;
  if (rule?.verdict === 'allow' && !tenantRequired) return { kind: 'run', via: 'rule_allow', rule: rule.rule };
  if (!call.mutating && !tenantRequired) return { kind: 'run', via: 'read_only' };
  const why = tenantRequired ? 'needs approval for this tenant' : 'changes state';
  switch (ctx.approvalMode) {
    case 'auto':
      return { kind: 'run', via: 'auto' };
    case 'deny':
      return {
        kind: 'refuse',
        code: 'mode_deny',
        message: `refused: ${call.name} ${why} and this run's approval mode is deny, so nothing ran. Tools that only read still work.`,
      };
    case 'prompt':
      return { kind: 'ask', reason: `${call.name} ${why} and the approval mode is prompt` };
  }
}

/**
 * Whether one call changes state, for the approval mode: the tool's answer for these
 * arguments when its actions differ (memory save and delete do, search and list do not),
 * else its catalogue flag. A tool nobody registered counts as mutating.
 */
export function callMutates(tool: Pick<ToolDefinition, 'mutating' | 'mutatingCall'> | undefined, args: Record<string, unknown> | undefined): boolean {
  if (!tool) return true;
  if (tool.mutatingCall && args) return tool.mutatingCall(args);
  return tool.mutating;
}

export function hardStopMessage(hardStopAfter: number): string {
  return `refused: this run reached its limit of ${hardStopAfter} tool calls (hard_stop_after), so no more tools will run. Summarise what you have done and found, and give your final answer now.`;
}

function trailingRepeats(keys: readonly string[], key: string): number {
  let n = 0;
  for (let i = keys.length - 1; i >= 0 && keys[i] === key; i--) n++;
  return n;
}

/** Notes the loop appends to a call's result when a guardrail count is reached. */
export function guardrailNote(seq: number, warnAfter: number, hardStopAfter: number): { kind: 'warning' | 'hard_stop'; text: string } | undefined {
  if (seq === hardStopAfter) {
    return {
      kind: 'hard_stop',
      text: `[runbox] That was tool call ${seq}, the last one this run may make (hard_stop_after=${hardStopAfter}). No more tools will run: summarise what you have done and found, and give your final answer.`,
    };
  }
  if (seq === warnAfter && warnAfter < hardStopAfter) {
    return {
      kind: 'warning',
      text: `[runbox] You have made ${seq} tool calls in this run; at ${hardStopAfter} no more tools will run. Finish the task with the calls you need most, then answer.`,
    };
  }
  return undefined;
}

/** JSON with object keys sorted, so `{a:1,b:2}` and `{b:2,a:1}` are the same call. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
