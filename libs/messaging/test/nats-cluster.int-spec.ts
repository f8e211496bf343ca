import { EventContract } from '@app/contracts';
import { startNats, TestNats, TestNatsCluster } from '@app/testing';
import pino from 'pino';
import { z } from 'zod';
import { isNatsUnavailable, NatsClient, StreamReplicasError } from '../src';

const logger = pino({ level: 'silent' });
const queued: EventContract<{ n: number }> = { subject: 'test.cluster.queued', payload: z.object({ n: z.number() }), maxBytes: 1024 };
const queue = (replicas: number) => ({ stream: 'TEST_QUEUE', consumer: 'workers', ackWaitMs: 5_000, duplicateWindowMs: 60_000, replicas });

/** The work queue on a real three-node JetStream cluster, and what a single server refuses. */
describe('NatsClient on a NATS cluster', () => {
  let cluster: TestNatsCluster;
  let single: TestNats;

  beforeAll(async () => {
    [cluster, single] = await Promise.all([new TestNatsCluster(3).start(), startNats()]);
  });

  afterAll(async () => {
    await cluster?.stop();
    await single?.stop();
  });

  it('takes NATS_URL as a comma-separated list, creates the stream with 3 replicas, and keeps every message when a node is killed', async () => {
    const client = await NatsClient.connect(cluster.url, 'test-cluster', logger);
    let killed: number | undefined;
    try {
      await client.ensureWorkQueue(queued, queue(3));
      const jsm = await client.connection.jetstreamManager();
      const info = await jsm.streams.info('TEST_QUEUE');
      expect(info.config.num_replicas).toBe(3);
      for (let n = 0; n < 20; n++) await client.publishToStream(queued, { n }, `m-${n}`);

      // The node the client talks to goes away: it reconnects to another, and the stream
      // (with a new leader if it had to) still holds every message.
      const connectedTo = client.connection.getServer();
      const index = [0, 1, 2].find((i) => cluster.nodeUrl(i).endsWith(connectedTo.split(':').pop() ?? '')) ?? 0;
      await cluster.kill(index);
      killed = index;
      // The stream and its consumer elect new leaders on the two nodes left; until then
      // JetStream's API times out. Once the stream's leader answers and its other copy has
      // caught up, all 20 messages are there and the consumer hands them out.
      const settled = await untilSettled(client, cluster.nodeName(index));
      expect(settled.stream.messages).toBe(20);
      const seen: number[] = [];
      const deadline = Date.now() + 30_000;
      while (seen.length < 20 && Date.now() < deadline) {
        try {
          const consumer = await client.consumer('TEST_QUEUE', 'workers');
          const msg = await consumer.next({ expires: 2_000 });
          if (!msg) continue;
          seen.push(client.parseEvent(queued, msg.data)!.n);
          msg.ack();
        } catch (err) {
          if (!isNatsUnavailable(err)) throw err;
        }
      }
      if (seen.length < 20) console.error('NATS state when messages were missing:', JSON.stringify(await clusterState(client)));
      expect(seen.sort((a, b) => a - b)).toEqual([...Array(20).keys()]);
      expect(client.connection.getServer()).not.toBe(connectedTo);
    } finally {
      await client.close();
      // The other tests need all three nodes, whatever happened here.
      if (killed !== undefined) await cluster.restart(killed);
    }
  });

  it('changes the replica count of an existing stream to the configured one', async () => {
    const client = await NatsClient.connect(cluster.url, 'test-cluster', logger);
    try {
      const other: EventContract<{ n: number }> = { ...queued, subject: 'test.cluster.resized' };
      await client.ensureWorkQueue(other, { ...queue(1), stream: 'TEST_RESIZE' });
      expect((await (await client.connection.jetstreamManager()).streams.info('TEST_RESIZE')).config.num_replicas).toBe(1);
      await client.ensureWorkQueue(other, { ...queue(3), stream: 'TEST_RESIZE' });
      const jsm = await client.connection.jetstreamManager();
      expect((await jsm.streams.info('TEST_RESIZE')).config.num_replicas).toBe(3);
    } finally {
      await client.close();
    }
  });

  it('says clearly when a single server cannot hold the replicas asked for', async () => {
    const client = await NatsClient.connect(single.url, 'test-single', logger);
    try {
      await expect(client.ensureWorkQueue(queued, queue(3))).rejects.toThrow(StreamReplicasError);
      await expect(client.ensureWorkQueue(queued, queue(3))).rejects.toThrow(/RUNBOX_NATS_STREAM_REPLICAS is 3, but the NATS server .* is not part of a cluster/);
      // With the setting right, the same server takes the queue.
      await client.ensureWorkQueue(queued, queue(1));
      expect((await (await client.connection.jetstreamManager()).streams.info('TEST_QUEUE')).config.num_replicas).toBe(1);
    } finally {
      await client.close();
    }
  });

  it('says clearly when the cluster cannot hold the replicas asked for', async () => {
    const client = await NatsClient.connect(cluster.url, 'test-cluster', logger);
    try {
      const other: EventContract<{ n: number }> = { ...queued, subject: 'test.cluster.toomany' };
      await client.ensureWorkQueue(other, { ...queue(1), stream: 'TEST_TOO_MANY' });
      await expect(client.ensureWorkQueue(other, { ...queue(5), stream: 'TEST_TOO_MANY' })).rejects.toThrow(
        /the stream TEST_TOO_MANY has 1 replicas and RUNBOX_NATS_STREAM_REPLICAS asks for 5, but the servers refused the change: /,
      );
    } finally {
      await client.close();
    }
  });
});

/**
 * Waits (at most 30 s) until the queue's stream and consumer have leaders on live nodes and
 * their other live copy is current. The killed node stays listed (not current) for a while.
 */
async function untilSettled(client: NatsClient, killed: string): Promise<{ stream: { messages: number } }> {
  const deadline = Date.now() + 30_000;
  let last: unknown = 'no answer';
  while (Date.now() < deadline) {
    try {
      const state = await clusterState(client);
      last = state;
      const copiesCurrent = (c: { leader?: string; replicas?: Array<{ name: string; current: boolean }> } | undefined) =>
        !!c?.leader && c.leader !== killed && (c.replicas ?? []).filter((r) => r.name !== killed).every((r) => r.current);
      if (copiesCurrent(state.streamCluster) && copiesCurrent(state.consumerCluster)) return state;
    } catch (err) {
      if (!isNatsUnavailable(err)) throw err;
      last = err;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`the stream and consumer did not settle on new leaders within 30 s: ${JSON.stringify(last)}`);
}

async function clusterState(client: NatsClient) {
  const jsm = await client.connection.jetstreamManager({ timeout: 2_000 });
  const stream = await jsm.streams.info('TEST_QUEUE');
  const consumer = await jsm.consumers.info('TEST_QUEUE', 'workers');
  return {
    stream: stream.state,
    streamCluster: stream.cluster,
    consumer: { delivered: consumer.delivered, ack_floor: consumer.ack_floor, num_ack_pending: consumer.num_ack_pending, num_pending: consumer.num_pending, num_redelivered: consumer.num_redelivered },
    consumerCluster: consumer.cluster,
  };
}
