import { ScriptedModelServer } from '@app/testing';
import { TestStack } from './test-stack';

export interface ToolCallSpec {
  name: string;
  arguments: Record<string, unknown>;
}

/** What a tool call returned, as the run's `tool_call.completed` event reports it. */
export interface CompletedToolCall {
  name: string;
  output: string;
  is_error: boolean;
  metadata: Record<string, any>;
}

/**
 * Runs a scripted model that makes `calls` one per turn and then answers "done"; returns
 * the finished run, its session and every tool result in call order.
 */
export async function runToolCalls(
  stack: TestStack,
  model: ScriptedModelServer,
  key: string,
  calls: ToolCallSpec[],
  body: Record<string, unknown> = {},
): Promise<{ run: any; sessionId: string; results: CompletedToolCall[] }> {
  calls.forEach((c, i) => model.enqueue({ toolCalls: [{ id: `call_${i + 1}`, name: c.name, arguments: c.arguments }] }));
  model.enqueue({ content: 'done' });
  const created = await stack.request('POST', '/v1/runs', { key, body: { input: 'use the tools', ...body } });
  if (created.status !== 202) throw new Error(`creating the run failed: ${created.status} ${created.text}`);
  const run = await stack.waitForRun(key, created.body.id, undefined, 120_000);
  if (run.status !== 'completed') throw new Error(`run ${run.id} ended ${run.status}: ${run.error}`);
  return { run, sessionId: created.body.session_id, results: await completedToolCalls(stack, key, run.id) };
}

/** Reads a finished run's event stream and returns its tool_call.completed events in order. */
export async function completedToolCalls(stack: TestStack, key: string, runId: string): Promise<CompletedToolCall[]> {
  const res = await stack.request('GET', `/v1/runs/${runId}/events`, { key });
  const out: CompletedToolCall[] = [];
  for (const block of res.text.split('\n\n')) {
    const lines = block.split('\n');
    const type = lines.find((l) => l.startsWith('event: '))?.slice(7);
    const data = lines.filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
    if (type === 'tool_call.completed') out.push(JSON.parse(data) as CompletedToolCall);
  }
  return out;
}

/** One gateway or sandbox tool call with no model (POST /v1/sessions/{id}/tools/{name}). */
export async function callTool(stack: TestStack, key: string, sessionId: string, name: string, args: Record<string, unknown>): Promise<CompletedToolCall> {
  const res = await stack.request('POST', `/v1/sessions/${sessionId}/tools/${name}`, { key, body: { arguments: args } });
  if (res.status !== 200) throw new Error(`${name} answered ${res.status}: ${res.text}`);
  return { name, ...res.body };
}
