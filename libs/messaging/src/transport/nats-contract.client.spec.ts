import { EventContract, RequestContract, rpcFailure } from '@app/contracts';
import { z } from 'zod';
import { NatsClient, NatsTimeoutError } from '../nats-client';
import { NatsContractClient } from './nats-contract.client';

const echoContract: RequestContract<{ text: string }, { text: string }> = {
  subject: 'test.echo.v1',
  request: z.object({ text: z.string() }),
  reply: z.object({ text: z.string() }),
  errorReply: (error, id) => ({ text: JSON.stringify(rpcFailure(error, id)) }),
  maxBytes: 1024,
};
const noticeContract: EventContract<{ text: string }> = { subject: 'test.notice.v1', payload: z.object({ text: z.string() }), maxBytes: 1024 };

/** The adapter's caller side, recording what it was asked to send. */
function fakeNats(answer: (payload: unknown) => Promise<unknown>) {
  const sent: Array<{ subject: string; payload: unknown; options?: { timeoutMs: number; subject?: string } }> = [];
  const nats = {
    request: (contract: { subject: string }, payload: unknown, options: { timeoutMs: number; subject?: string }) => {
      sent.push({ subject: contract.subject, payload, options });
      return answer(payload);
    },
    publish: (contract: { subject: string }, payload: unknown) => sent.push({ subject: contract.subject, payload }),
  };
  return { client: new NatsContractClient(nats as unknown as NatsClient), sent };
}

describe('NatsContractClient', () => {
  it('sends a request with its contract, wait and pinned subject, and returns the reply', async () => {
    const { client, sent } = fakeNats((payload) => Promise.resolve(payload));
    await expect(client.request({ contract: echoContract, timeoutMs: 1500, subject: 'test.echo.v1.exec-2' }, { text: 'hi' })).resolves.toEqual({ text: 'hi' });
    expect(sent).toEqual([{ subject: 'test.echo.v1', payload: { text: 'hi' }, options: { timeoutMs: 1500, subject: 'test.echo.v1.exec-2' } }]);
  });

  it('passes "no responders" on as the adapter raised it', async () => {
    const noResponders = new NatsTimeoutError('test.echo.v1', true);
    const { client } = fakeNats(() => Promise.reject(noResponders));
    await expect(client.request({ contract: echoContract, timeoutMs: 1500 }, { text: 'hi' })).rejects.toBe(noResponders);
  });

  it('publishes events through the adapter', () => {
    const { client, sent } = fakeNats(() => Promise.reject(new Error('no requests here')));
    client.notify(noticeContract, { text: 'stop' });
    expect(sent).toEqual([{ subject: 'test.notice.v1', payload: { text: 'stop' } }]);
  });
});
