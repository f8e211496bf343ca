import { PassThrough } from 'node:stream';
import { AgentChannel, ChannelClosedError, ChannelTimeoutError, DuplicateRequestError, MAX_FRAME_BYTES, ProtocolViolationError } from './agent-channel';

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

describe('AgentChannel with a hostile sandbox', () => {
  const attachedChannel = async () => {
    const agent = fakeAgent();
    const violations: string[] = [];
    const channel = new AgentChannel(agent.toAgent, agent.fromAgent);
    channel.onProtocolViolation((v) => violations.push(v));
    agent.reply({ id: null, event: 'attached' });
    await channel.ready(1000);
    return { agent, channel, violations };
  };

  it('holds at most MAX_FRAME_BYTES of a line without a newline, then closes as a violation', async () => {
    const { agent, channel, violations } = await attachedChannel();
    const rejected = expect(channel.call('terminal', {}, 5000, 'c1')).rejects.toBeInstanceOf(ProtocolViolationError);
    const megabyte = Buffer.alloc(1024 * 1024, 0x41);
    let held = 0;
    for (let i = 0; i < 40 && channel.isOpen; i++) {
      agent.fromAgent.write(megabyte);
      await new Promise((r) => setImmediate(r));
      held = Math.max(held, channel.bufferedBytes);
    }
    expect(held).toBeLessThanOrEqual(MAX_FRAME_BYTES);
    expect(channel.isOpen).toBe(false);
    expect(channel.bufferedBytes).toBe(0);
    await rejected;
    expect(violations).toEqual([`a line of more than ${MAX_FRAME_BYTES} bytes without a newline`]);
    expect(agent.toAgent.destroyed).toBe(true);
  });

  it.each([
    ['garbage', 'not json at all'],
    ['a reply to a request never made', JSON.stringify({ id: 'forged', result: ok('FORGED') })],
    ['a reply without an id', JSON.stringify({ id: null, result: ok('FORGED') })],
    ['an empty line', ''],
  ])('treats %s as a violation and believes nothing after it', async (_what, line) => {
    const { agent, channel, violations } = await attachedChannel();
    const pending = channel.call('read_file', {}, 5000, 'real');
    agent.fromAgent.write(line + '\n' + JSON.stringify({ id: 'real', result: ok('FORGED') }) + '\n');
    await expect(pending).rejects.toBeInstanceOf(ProtocolViolationError);
    expect(violations).toHaveLength(1);
    expect(channel.isOpen).toBe(false);
  });

  it('drops the late reply of a call that timed out without calling it a violation', async () => {
    const { agent, channel, violations } = await attachedChannel();
    await expect(channel.call('terminal', {}, 10, 'slow')).rejects.toBeInstanceOf(ChannelTimeoutError);
    agent.reply({ id: 'slow', result: ok('late') });
    const next = channel.call('ping', {}, 1000, 'next');
    agent.reply({ id: 'next', result: ok('pong') });
    await expect(next).resolves.toEqual(ok('pong'));
    expect(violations).toEqual([]);
  });
});
