import { eventually } from '@app/testing';
import Docker from 'dockerode';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { TenantCredentials, TestStack } from './support/test-stack';

interface ToolResponse {
  status: number;
  body: { output: string; metadata: Record<string, unknown>; is_error: boolean; error?: { code: string; message: string } };
}

const AGENT = "$(pgrep -f '^python3 -u /opt/runbox/runbox_agent.py serve')";
const RELAY = "$(pgrep -f '^runbox-attach')";

/**
 * The agent has an identity of its own (root with SETUID, SETGID and KILL) and every tool
 * process runs as uid 1000 with none, so code run by a tool cannot reach the channel
 * between the executor and the agent; and the executor believes nothing a sandbox sends
 * beyond the protocol, stopping a sandbox that breaks it.
 */
describe('the sandbox agent and its channel', () => {
  const docker = new Docker();
  let stack: TestStack;
  let tenant: TenantCredentials;

  const newSession = async (): Promise<string> => (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
  const tool = (sessionId: string, name: string, args: Record<string, unknown>): Promise<ToolResponse> =>
    stack.request('POST', `/v1/sessions/${sessionId}/tools/${name}`, { key: tenant.apiKey, body: { arguments: args } });
  const terminal = async (sessionId: string, command: string): Promise<string> => {
    const res = await tool(sessionId, 'terminal', { command });
    expect(res.status).toBe(200);
    return res.body.output;
  };
  const containerOf = async (sessionId: string): Promise<string | undefined> =>
    (await docker.listContainers({ filters: { label: [`runbox.session=${sessionId}`] } }))[0]?.Id;
  const gone = async (containerId: string) => {
    try {
      await docker.getContainer(containerId).inspect();
      return false;
    } catch {
      return true;
    }
  };

  beforeAll(async () => {
    stack = await new TestStack().start();
    tenant = await stack.createTenant();
  });

  afterAll(async () => {
    await stack?.stop();
  });

  it('runs the agent as root with SETUID, SETGID and KILL only, its files as the sandbox user, out of reach of tools', async () => {
    const id = await newSession();
    const agent = await terminal(id, `grep -E '^(Uid|Gid|CapEff|NoNewPrivs):' /proc/${AGENT}/status; kill -9 ${AGENT}; echo "kill=$?"`);
    // real, effective, saved, file-system: root, but file access as the sandbox user.
    expect(agent).toMatch(/^Uid:\s+0\s+0\s+0\s+1000$/m);
    expect(agent).toMatch(/^Gid:\s+0\s+0\s+0\s+1000$/m);
    // CAP_KILL (5), CAP_SETGID (6), CAP_SETUID (7): nothing else.
    expect(agent).toMatch(/^CapEff:\s+00000000000000e0$/m);
    expect(agent).toMatch(/^NoNewPrivs:\s+1$/m);
    expect(agent).toContain('Operation not permitted');
    expect(agent).toContain('kill=1');
    // Every thread of the agent (request workers, waiters, the job reclaimer) makes its file
    // accesses as the sandbox user, not only the main one.
    await tool(id, 'read_file', { path: '.' });
    // A short-lived worker thread may end between the glob and the read: skip it quietly.
    const threads = await terminal(id, `cat /proc/${AGENT}/task/*/status 2>/dev/null | grep '^Uid:' | sort | uniq -c`);
    expect(threads).toMatch(/stdout:\n *\d+ Uid:\t0\t0\t0\t1000$/);

    const own = await terminal(id, "id -u; id -g; grep -E '^(Groups|CapInh|CapPrm|CapEff|CapAmb|NoNewPrivs):' /proc/self/status");
    expect(own).toMatch(/stdout:\n1000\n1000\nGroups:\s*\n/);
    for (const set of ['CapInh', 'CapPrm', 'CapEff', 'CapAmb']) expect(own).toMatch(new RegExp(`^${set}:\\s+0000000000000000$`, 'm'));
    expect(own).toMatch(/^NoNewPrivs:\s+1$/m);

    expect((await tool(id, 'write_file', { path: 'made-by-tool.txt', content: 'x' })).status).toBe(200);
    expect(await terminal(id, 'stat -c %u:%g made-by-tool.txt .runbox/jobs /tmp/runbox')).toContain('1000:1000\n1000:1000\n1000:1000');
  });

  it('keeps a terminal command from replacing the socket, tracing the agent, writing to or killing the relay, and forging replies', async () => {
    const id = await newSession();
    await terminal(id, 'true');
    const before = await containerOf(id);
    const script = readFileSync(join(__dirname, 'support', 'channel-attack.py')).toString('base64');
    const attack = await tool(id, 'terminal', { command: `echo ${script} | base64 -d > attack.py && python3 attack.py` });
    expect(attack.status).toBe(200);
    const report = attack.body.output;
    expect(report).toContain('connect /run/runbox/agent.sock: Permission denied');
    expect(report).toContain('replace /run/runbox/agent.sock: Permission denied');
    expect(report).toContain('ptrace the agent: Operation not permitted');
    expect(report).toContain("write into the relay's stdout: Permission denied");
    expect(report).toContain('kill the relay: Operation not permitted');

    // Whatever the attack managed to serve, the executor still talks to the real agent.
    const after = await tool(id, 'terminal', { command: 'echo genuine-$((6*7))' });
    expect(after.status).toBe(200);
    expect(after.body.output).toContain('genuine-42');
    expect(after.body.output).not.toContain('FORGED');
    expect((await tool(id, 'write_file', { path: 'real.txt', content: 'the real content' })).status).toBe(200);
    const read = await tool(id, 'read_file', { path: 'real.txt' });
    expect(read.body.output).toContain('the real content');
    expect(read.body.output).not.toContain('FORGED');
    expect(await containerOf(id)).toBe(before);
  });

  it('notices an agent that died and starts it again on the same workspace', async () => {
    const id = await newSession();
    await terminal(id, 'echo kept > kept.txt');
    const before = (await containerOf(id))!;
    // Nothing a tool starts can kill the agent; the engine's root stands in for an OOM kill.
    await asRoot(before, `kill -9 ${AGENT}`);
    const after = await eventually('the session answering again', async () => {
      const res = await tool(id, 'terminal', { command: 'cat kept.txt' });
      return res.status === 200 ? res.body.output : undefined;
    });
    expect(after).toContain('kept');
    expect(await containerOf(id)).not.toBe(before);
  });

  it('stops a sandbox that floods its channel with 40 MB and no newline, and serves other sessions meanwhile', async () => {
    const flooder = await newSession();
    const other = await newSession();
    await terminal(flooder, 'echo kept > kept.txt');
    await terminal(other, 'true');
    const flooded = (await containerOf(flooder))!;

    // Stands in for a relay (or agent) that went wrong: tools cannot write there any more.
    const flood = asRoot(flooded, `head -c 41943040 /dev/zero | tr '\\0' A > /proc/${RELAY}/fd/1`);
    const otherCalls: string[] = [];
    await eventually('the flooded sandbox to be removed', async () => {
      otherCalls.push(await terminal(other, 'echo other-$((20+22))'));
      return gone(flooded);
    }, 60_000, 0);
    await flood;
    expect(otherCalls.length).toBeGreaterThan(0);
    expect(otherCalls.every((out) => out.includes('other-42'))).toBe(true);
    // How little of it the executor holds is checked in agent-channel.spec.ts (at most
    // MAX_FRAME_BYTES); an RSS reading here would depend on the garbage collector.

    const restarted = await tool(flooder, 'terminal', { command: 'cat kept.txt' });
    expect(restarted.status).toBe(200);
    expect(restarted.body.output).toContain('kept');
    expect(await containerOf(flooder)).not.toBe(flooded);
  });

  it('stops a sandbox whose channel carries a reply nobody asked for', async () => {
    const id = await newSession();
    await terminal(id, 'true');
    const before = (await containerOf(id))!;
    const forged = JSON.stringify({ id: 'never-asked', result: { output: 'FORGED', metadata: {}, is_error: false } });
    await asRoot(before, `printf '%s\\n' '${forged}' > /proc/${RELAY}/fd/1`);
    await eventually('the sandbox that broke the protocol to be removed', () => gone(before));
    const next = await tool(id, 'terminal', { command: 'echo fresh' });
    expect(next.status).toBe(200);
    expect(next.body.output).toContain('fresh');
  });

  /** A command as the container's root over the engine's API: what no tool can do. */
  async function asRoot(containerId: string, script: string): Promise<void> {
    const exec = await docker.getContainer(containerId).exec({ Cmd: ['sh', '-c', script], User: '0:0', AttachStdout: true, AttachStderr: true });
    const stream = await exec.start({});
    await new Promise<void>((resolve) => {
      stream.on('end', resolve);
      stream.on('close', resolve);
      stream.on('error', () => resolve());
      stream.resume();
    });
  }
});
