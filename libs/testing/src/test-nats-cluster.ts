import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, StorageType } from 'nats';
import { freePort, stopProcess } from './test-nats';

interface ClusterNode {
  name: string;
  clientPort: number;
  routePort: number;
  /** The HTTP monitoring port (connz): which clients a node serves. */
  monitorPort: number;
  dir: string;
  /** The server's own log: why a node exited, when one does. */
  log: string;
  proc?: ChildProcess;
}

/** What a node's monitoring endpoint says of the JetStream meta group (`/jsz`). */
interface MetaCluster {
  leader?: string;
  /** The other members, as the leader sees them (only the leader lists them). */
  replicas?: Array<{ name: string; current?: boolean; offline?: boolean }>;
}

/** Start attempts when a node cannot bind one of its ports (another process took it first). */
const START_ATTEMPTS = 3;

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

  /** One node's server name (`n1`, `n2`, …), as JetStream's cluster info names its peers. */
  nodeName(index: number): string {
    return this.nodes[index].name;
  }

  /** One node's client URL. */
  nodeUrl(index: number): string {
    return `nats://127.0.0.1:${this.nodes[index].clientPort}`;
  }

  /**
   * Starts the nodes and returns once the cluster places a stream on every node: before
   * that, a stream asking for as many replicas as there are nodes is refused ("no suitable
   * peers for placement").
   */
  async start(): Promise<this> {
    for (let attempt = 1; ; attempt++) {
      await this.assignPorts();
      for (let i = 0; i < this.size; i++) this.launch(i);
      try {
        await this.waitForMetaGroup();
        await this.waitForPlacement();
        return this;
      } catch (err) {
        const portTaken = this.nodes.some((n) => this.logOf(n).includes('address already in use'));
        await Promise.all(this.nodes.map((n) => (n.proc ? stopProcess(n.proc) : Promise.resolve())));
        if (!portTaken || attempt === START_ATTEMPTS) throw err;
      }
    }
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

  /** Starts a killed node again on its own storage and waits until the cluster places streams on it again. */
  async restart(index: number): Promise<void> {
    this.launch(index);
    await this.waitForMetaGroup();
    await this.waitForPlacement();
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => (n.proc ? stopProcess(n.proc) : Promise.resolve())));
    rmSync(this.root, { recursive: true, force: true });
  }

  /** Fresh ports and storage for every node (a retried start gets new ports too). */
  private async assignPorts(): Promise<void> {
    this.nodes.length = 0;
    for (let i = 0; i < this.size; i++) {
      const name = `n${i + 1}`;
      const dir = join(this.root, name);
      rmSync(dir, { recursive: true, force: true });
      this.nodes.push({ name, clientPort: await freePort(), routePort: await freePort(), monitorPort: await freePort(), dir, log: join(this.root, `${name}.log`) });
    }
  }

  private launch(index: number): void {
    const node = this.nodes[index];
    const routes = this.nodes.filter((n) => n !== node).map((n) => `nats://127.0.0.1:${n.routePort}`).join(',');
    const args = [
      '-a', '127.0.0.1', '-p', String(node.clientPort), '-m', String(node.monitorPort), '-n', node.name,
      '--cluster_name', this.clusterName, '--cluster', `nats://127.0.0.1:${node.routePort}`, '--routes', routes,
      '-js', '-sd', node.dir, '-l', node.log,
    ];
    node.proc = spawn('nats-server', args, { stdio: 'ignore' });
  }

  private logOf(node: ClusterNode): string {
    return existsSync(node.log) ? readFileSync(node.log, 'utf8') : '';
  }

  /**
   * Polls the nodes' monitoring endpoints until one of them leads the meta group and lists
   * every other running node as current.
   */
  private async waitForMetaGroup(): Promise<void> {
    const deadline = Date.now() + 30_000;
    let seen = 'no answer yet';
    while (Date.now() < deadline) {
      const dead = this.nodes.find((n) => n.proc && n.proc.exitCode !== null);
      if (dead) throw new Error(`nats-server ${dead.name} exited with ${dead.proc?.exitCode}: ${this.logOf(dead).split('\n').filter((l) => l.includes('[FTL]') || l.includes('[ERR]')).slice(-3).join(' | ')}`);
      const running = this.nodes.filter((n) => n.proc);
      for (const node of running) {
        const meta = await this.metaCluster(node);
        if (!meta || meta.leader !== node.name) continue;
        const current = new Set((meta.replicas ?? []).filter((r) => r.current && !r.offline).map((r) => r.name));
        seen = `leader ${node.name}, current: ${[...current].join(', ') || 'none'}`;
        if (running.every((n) => n === node || current.has(n.name))) return;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`the NATS cluster's JetStream meta group did not take in every running node within 30 s (${seen})`);
  }

  /**
   * Creates (and deletes) a throwaway stream with one copy on every running node until the
   * meta leader accepts it. A node the meta group already counts as current can still be
   * "offline" to placement until the leader has its first statistics after a restart.
   */
  private async waitForPlacement(): Promise<void> {
    const running = this.nodes.filter((n) => n.proc);
    const nc = await connect({ servers: running.map((n) => `nats://127.0.0.1:${n.clientPort}`), timeout: 2_000 });
    try {
      const jsm = await nc.jetstreamManager({ timeout: 2_000 });
      const deadline = Date.now() + 30_000;
      let last: unknown;
      while (Date.now() < deadline) {
        const name = `RUNBOX_TEST_READY_${randomBytes(4).toString('hex')}`;
        try {
          await jsm.streams.add({ name, subjects: [`runbox.test.ready.${name}`], num_replicas: running.length, storage: StorageType.Memory });
          await jsm.streams.delete(name);
          return;
        } catch (err) {
          last = err;
          // A request that timed out may still have created it.
          await jsm.streams.delete(name).catch(() => undefined);
          await new Promise((r) => setTimeout(r, 200));
        }
      }
      throw new Error(`the NATS cluster did not place a stream on all ${running.length} running nodes within 30 s: ${String(last)}`);
    } finally {
      await nc.close();
    }
  }

  private async metaCluster(node: ClusterNode): Promise<MetaCluster | undefined> {
    const res = await fetch(`http://127.0.0.1:${node.monitorPort}/jsz`, { signal: AbortSignal.timeout(1_000) }).catch(() => undefined);
    if (!res?.ok) return undefined;
    const body = (await res.json().catch(() => undefined)) as { meta_cluster?: MetaCluster } | undefined;
    return body?.meta_cluster;
  }
}
