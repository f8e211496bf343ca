import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'nats';
import { freePort, stopProcess } from './test-nats';

interface ClusterNode {
  name: string;
  clientPort: number;
  routePort: number;
  /** The HTTP monitoring port (connz): which clients a node serves. */
  monitorPort: number;
  dir: string;
  proc?: ChildProcess;
}

/**
 * A JetStream cluster of real nats-server processes on loopback ports, private to one test
 * file: each node has its own client port, route port and storage. A node can be killed
 * (SIGKILL, as a crash) and started again on its own storage, as a restarted pod would be.
 */
export class TestNatsCluster {
  private readonly nodes: ClusterNode[] = [];
  private readonly root = mkdtempSync(join(tmpdir(), 'runbox-nats-cluster-'));
  private readonly clusterName = `runbox-test-${process.pid}`;

  constructor(private readonly size = 3) {}

  /** Every node's client URL, comma-separated: what NATS_URL takes. */
  get url(): string {
    return this.nodes.map((n) => `nats://127.0.0.1:${n.clientPort}`).join(',');
  }

  /** One node's client URL. */
  nodeUrl(index: number): string {
    return `nats://127.0.0.1:${this.nodes[index].clientPort}`;
  }

  /** Starts the nodes and returns once JetStream has a meta leader (the cluster takes streams). */
  async start(): Promise<this> {
    for (let i = 0; i < this.size; i++) {
      this.nodes.push({ name: `n${i + 1}`, clientPort: await freePort(), routePort: await freePort(), monitorPort: await freePort(), dir: join(this.root, `n${i + 1}`) });
    }
    for (let i = 0; i < this.size; i++) this.launch(i);
    await this.waitForJetStream();
    return this;
  }

  /**
   * The running node a client whose connection name starts with `prefix` (e.g.
   * `runbox-gateway`) is connected to, from each node's monitoring endpoint; -1 if none.
   */
  async nodeServing(prefix: string): Promise<number> {
    for (const [index, node] of this.nodes.entries()) {
      if (!node.proc) continue;
      const res = await fetch(`http://127.0.0.1:${node.monitorPort}/connz?limit=1024`).catch(() => undefined);
      if (!res?.ok) continue;
      const { connections } = (await res.json()) as { connections?: Array<{ name?: string }> };
      if ((connections ?? []).some((c) => c.name?.startsWith(prefix))) return index;
    }
    return -1;
  }

  /** Crashes one node (SIGKILL): its connections drop, the others carry on. */
  async kill(index: number): Promise<void> {
    const node = this.nodes[index];
    if (node.proc) await stopProcess(node.proc, 'SIGKILL');
    node.proc = undefined;
  }

  /** Starts a killed node again on its own storage and waits until the cluster answers through it. */
  async restart(index: number): Promise<void> {
    this.launch(index);
    await this.waitForJetStream(index);
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => (n.proc ? stopProcess(n.proc) : Promise.resolve())));
    rmSync(this.root, { recursive: true, force: true });
  }

  private launch(index: number): void {
    const node = this.nodes[index];
    const routes = this.nodes.filter((n) => n !== node).map((n) => `nats://127.0.0.1:${n.routePort}`).join(',');
    const args = [
      '-a', '127.0.0.1', '-p', String(node.clientPort), '-m', String(node.monitorPort), '-n', node.name,
      '--cluster_name', this.clusterName, '--cluster', `nats://127.0.0.1:${node.routePort}`, '--routes', routes,
      '-js', '-sd', node.dir,
    ];
    node.proc = spawn('nats-server', args, { stdio: 'ignore' });
  }

  /** Polls until JetStream answers account info through `index` (or any node), i.e. a meta leader is elected. */
  private async waitForJetStream(index?: number): Promise<void> {
    const deadline = Date.now() + 30_000;
    const servers = index === undefined ? this.nodes.map((_, i) => this.nodeUrl(i)) : [this.nodeUrl(index)];
    let last: unknown;
    while (Date.now() < deadline) {
      const dead = this.nodes.find((n) => n.proc && n.proc.exitCode !== null);
      if (dead) throw new Error(`nats-server ${dead.name} exited with ${dead.proc?.exitCode}`);
      try {
        const nc = await connect({ servers, timeout: 1_000, maxReconnectAttempts: 0 });
        try {
          await (await nc.jetstreamManager({ timeout: 1_000 })).getAccountInfo();
          return;
        } finally {
          await nc.close();
        }
      } catch (err) {
        last = err;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    throw new Error(`the NATS cluster did not elect a JetStream leader within 30 s: ${String(last)}`);
  }
}
