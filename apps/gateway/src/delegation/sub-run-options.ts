import { RunOptions } from '../runs/run-options';
import { applyAllowlist } from '../tools/tool-selection';

export interface SubRunToolRequest {
  /** Members of the toolset the call named, if it named one. */
  toolset?: readonly string[];
  /** The call's allowlist patterns (`*`, exact names, `prefix*`, `!name`), if it gave any. */
  tools?: readonly string[];
}

/**
 * The tools a sub-run gets: those its parent may use, narrowed by the toolset and the
 * allowlist the delegate_task call asked for. Never wider than the parent's: a name the
 * parent lacks is ignored, like an unknown name in any allowlist.
 */
export function subRunTools(parentTools: ReadonlySet<string>, request: SubRunToolRequest): string[] {
  let chosen = new Set(parentTools);
  if (request.toolset) {
    const members = new Set(request.toolset);
    chosen = new Set([...chosen].filter((name) => members.has(name)));
  }
  if (request.tools) chosen = applyAllowlist(chosen, [...request.tools]);
  return [...chosen].sort();
}

/**
 * A sub-run's options: exactly `tools` (stored as the `all` toolset narrowed to those
 * names, so nothing registered later widens it), and everything else that governs how the
 * parent works: model, system text, approval mode, permission rules, limits (counted
 * afresh in the sub-run) and memory scope.
 */
export function subRunOptions(parent: RunOptions, tools: readonly string[]): RunOptions {
  const inherited: RunOptions = {
    model: parent.model,
    system: parent.system,
    approval_mode: parent.approval_mode,
    permissions: parent.permissions,
    limits: parent.limits,
    memory_scope: parent.memory_scope,
  };
  const options = Object.fromEntries(Object.entries(inherited).filter(([, v]) => v !== undefined)) as RunOptions;
  return { ...options, toolset: 'all', tools: [...tools] };
}
