import { PassThrough } from 'node:stream';
import { AgentChannel, ChannelClosedError, ChannelTimeoutError, DuplicateRequestError } from './agent-channel';

function fakeAgent() {
  const toAgent = new PassThrough();
  const fromAgent = new PassThrough();
  const requests: Array<{ id: string; op: string; args: unknown }> = [];
  toAgent.setEncoding('utf8');
  toAgent.on('data', (chunk: string) => {
    for (const line of chunk.split('\n').filter(Boolean)) requests.push(JSON.parse(line));
  });
  const reply = (obj: unknown) => fromAgent.write(JSON.stringify(obj) + '\n');
  return { toAgent, fromAgent, requests, reply };
}

const ok = (output: string) => ({ output, metadata: {}, is_error: false });

describe('AgentChannel', () => {
  it('matches out-of-order replies to their requests', async () => {
    const agent = fakeAgent();
    const channel = new AgentChannel(agent.toAgent, agent.fromAgent);
    agent.reply({ id: null, event: 'attached' });
    await channel.ready(1000);
    const a = channel.call('ping', {}, 1000, 'a');
    const b = channel.call('ping', {}, 1000, 'b');
    await new Promise((r) => setImmediate(r));
    expect(agent.requests.map((r) => r.id)).toEqual(['a', 'b']);
    agent.fromAgent.write(JSON.stringify({ id: 'b', result: ok('second') }) + '\n' + '{"id": "a", "res');
    agent.fromAgent.write('ult": {"output": "first", "metadata": {}, "is_error": false}}\n');
    await expect(a).resolves.toEqual(ok('first'));
    await expect(b).resolves.toEqual(ok('second'));
  });

  it('refuses a second request with an id still in flight, leaving the first to its own reply', async () => {
    const agent = fakeAgent();
    const channel = new AgentChannel(agent.toAgent, agent.fromAgent, () => undefined, false);
    const first = channel.call('read_bytes', {}, 1000, 'same');
    await expect(channel.call('read_bytes', {}, 1000, 'same')).rejects.toBeInstanceOf(DuplicateRequestError);
    agent.reply({ id: 'same', result: ok('first') });
    await expect(first).resolves.toEqual(ok('first'));
    expect(agent.requests).toHaveLength(1);
  });

  it('fails pending calls when the stream ends, and refuses new ones', async () => {
    const agent = fakeAgent();
    let closed = false;
    const channel = new AgentChannel(agent.toAgent, agent.fromAgent, () => (closed = true));
    const pending = channel.call('terminal', {}, 5000);
    agent.fromAgent.end();
    await expect(pending).rejects.toBeInstanceOf(ChannelClosedError);
    expect(closed).toBe(true);
    expect(channel.isOpen).toBe(false);
    await expect(channel.call('ping', {}, 100)).rejects.toBeInstanceOf(ChannelClosedError);
  });

  it('times out a call the agent never answers', async () => {
    const agent = fakeAgent();
    const channel = new AgentChannel(agent.toAgent, agent.fromAgent);
    await expect(channel.call('ping', {}, 20)).rejects.toBeInstanceOf(ChannelTimeoutError);
  });

  it('reports an agent-level error as a rejection with its code', async () => {
    const agent = fakeAgent();
    const channel = new AgentChannel(agent.toAgent, agent.fromAgent);
    const call = channel.call('nope', {}, 1000, 'x');
    agent.reply({ id: 'x', error: { code: 'unknown_op', message: "unknown op 'nope'" } });
    await expect(call).rejects.toThrow(/unknown_op/);
  });
});
