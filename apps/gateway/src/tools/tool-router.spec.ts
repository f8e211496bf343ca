import { z } from 'zod';
import { ExecutorClient } from './executor.client';
import { GatewayTool, GatewayToolContext } from './gateway-tool';
import { executorRefusal, InvalidToolArgumentsError, ToolInfrastructureError, ToolNotDispatchedError, ToolRouter } from './tool-router';
import { ToolRegistry } from './tool-registry';

class EchoTool implements GatewayTool {
  readonly definition = {
    name: 'echo',
    description: 'Echoes its text.',
    parameters: z.object({ text: z.string().min(1) }).strict(),
    mutating: false,
    toolsets: ['minimal' as const],
    runsIn: 'gateway' as const,
    timeoutSeconds: 7,
  };
  readonly seen: Array<{ ctx: GatewayToolContext; args: Record<string, unknown> }> = [];

  async execute(ctx: GatewayToolContext, args: { text: string }) {
    this.seen.push({ ctx, args });
    return { output: args.text.repeat(3), metadata: { length: args.text.length }, is_error: false };
  }
}

describe('ToolRouter with gateway tools', () => {
  const callTool = jest.fn();
  const executor = { callTool } as unknown as ExecutorClient;
  const echo = new EchoTool();
  const router = new ToolRouter(new ToolRegistry([echo]), executor);
  const ctx = { tenantId: 'ten_1', sessionId: 'ses_1', executorId: null, runId: 'run_1', memoryScope: 'user:7' };

  it('runs a gateway tool in the gateway with parsed arguments, its limits, and the run context', async () => {
    const result = await router.execute({ ...ctx, maxOutputChars: 100, timeouts: { echo: 3 } }, 'echo', { text: 'ab' });
    expect(result).toEqual({ output: 'ababab', metadata: { length: 2 }, is_error: false });
    expect(echo.seen[0].ctx).toMatchObject({ runId: 'run_1', memoryScope: 'user:7', maxOutputChars: 100, timeoutMs: 3_000 });
    expect(callTool).not.toHaveBeenCalled();
  });

  it('uses the tool\'s own timeout, and cuts its output to the budget', async () => {
    const result = await router.execute({ ...ctx, maxOutputChars: 10 }, 'echo', { text: 'abcdef' });
    expect(result.output).toBe('abcdefabcd\n… 8 characters cut (max_output_chars=10)');
    expect(echo.seen[1].ctx.timeoutMs).toBe(7_000);
  });

  it('refuses bad arguments before the tool runs', async () => {
    await expect(router.execute(ctx, 'echo', { text: '' })).rejects.toThrow(InvalidToolArgumentsError);
    expect(echo.seen).toHaveLength(2);
  });

  it('lists gateway tools in the catalogue and their toolsets', () => {
    const registry = new ToolRegistry([echo]);
    expect(registry.manifest(['echo'])[0]).toMatchObject({ name: 'echo', toolsets: ['minimal', 'default', 'all'] });
    expect(registry.toolset('minimal')).toContain('echo');
  });
});

describe('executorRefusal', () => {
  it('makes a sandbox still starting a temporary refusal with nothing run, to be tried again later', () => {
    const err = executorRefusal({ code: 'sandbox_starting', message: 'the sandbox was not ready within 60 s; nothing ran' });
    expect(err).toBeInstanceOf(ToolInfrastructureError);
    expect(err).not.toBeInstanceOf(ToolNotDispatchedError);
    expect(err).toMatchObject({ kind: 'executor_unavailable', outcomeUnknown: false, retryAfterSeconds: 5 });
  });

  it('keeps the kinds of the other refusals', () => {
    expect(executorRefusal({ code: 'unavailable', message: 'db away' })).toBeInstanceOf(ToolNotDispatchedError);
    expect(executorRefusal({ code: 'not_found', message: 'x' })).toMatchObject({ kind: 'not_found' });
    expect(executorRefusal({ code: 'quota_exceeded', message: 'x' })).toMatchObject({ kind: 'quota_exceeded' });
    expect(executorRefusal({ code: 'sandbox_failed', message: 'x' })).toMatchObject({ kind: 'sandbox_failed', retryAfterSeconds: undefined });
  });
});
