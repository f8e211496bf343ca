import { ModelError, ModelProvider, ModelRequest } from './model-provider';
import { ModelCallRecord, TimedModelProvider } from './timed-model-provider';

function request(signal?: AbortSignal): ModelRequest {
  return { model: 'm-1', messages: [{ role: 'user', content: 'hi' }], tools: [], signal };
}

function timed(complete: ModelProvider['complete']): { provider: TimedModelProvider; records: ModelCallRecord[] } {
  const records: ModelCallRecord[] = [];
  return { provider: new TimedModelProvider({ complete }, (r) => records.push(r)), records };
}

describe('TimedModelProvider', () => {
  it('records an answered call as ok, with its model and a duration', async () => {
    const { provider, records } = timed(async () => ({ content: 'hello', toolCalls: [], usage: { inputTokens: 1, outputTokens: 1 } }));
    await expect(provider.complete(request())).resolves.toMatchObject({ content: 'hello' });
    expect(records).toEqual([{ model: 'm-1', outcome: 'ok', seconds: expect.any(Number) }]);
    expect(records[0].seconds).toBeGreaterThanOrEqual(0);
  });

  it('records a failure as an error, saying whether it was retryable, and rethrows it', async () => {
    const { provider, records } = timed(() => Promise.reject(new ModelError('HTTP 529', true)));
    await expect(provider.complete(request())).rejects.toThrow('HTTP 529');
    const { provider: other, records: otherRecords } = timed(() => Promise.reject(new Error('socket hang up')));
    await expect(other.complete(request())).rejects.toThrow('socket hang up');
    expect(records).toEqual([{ model: 'm-1', outcome: 'error', seconds: expect.any(Number), retryable: true }]);
    expect(otherRecords).toEqual([{ model: 'm-1', outcome: 'error', seconds: expect.any(Number), retryable: false }]);
  });

  it('records a call its run stopped as aborted, not as a provider error', async () => {
    const controller = new AbortController();
    const { provider, records } = timed(() => {
      controller.abort();
      return Promise.reject(new Error('aborted'));
    });
    await expect(provider.complete(request(controller.signal))).rejects.toThrow('aborted');
    expect(records).toEqual([{ model: 'm-1', outcome: 'aborted', seconds: expect.any(Number) }]);
  });
});
