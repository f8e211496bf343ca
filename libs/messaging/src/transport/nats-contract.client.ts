import { ClientProxy, ReadPacket, WritePacket } from '@nestjs/microservices';
import { EventContract, RequestContract } from '@app/contracts';
import { NatsClient } from '../nats-client';

/** A request's pattern: its contract, the wait for a reply, and the subject when it is not the contract's own (a pinned responder's). */
export type ContractCall<Req, Rep, ReqInput> = {
  readonly contract: RequestContract<Req, Rep, ReqInput>;
  readonly timeoutMs: number;
  readonly subject?: string;
};

type AnyCall = ContractCall<unknown, unknown, unknown>;

/**
 * A Nest client over the NatsClient adapter, the caller's half of NatsContractServer: a
 * request's pattern is a ContractCall, so the adapter checks the request and the reply
 * against the contract and keeps "no responders" apart from a timeout (NatsTimeoutError).
 * The connection belongs to its provider, which opens and drains it.
 */
export class NatsContractClient extends ClientProxy {
  constructor(protected readonly nats: NatsClient) {
    super();
  }

  /**
   * The reply, as its contract parsed it; NatsTimeoutError when nobody answered. Straight to
   * the adapter rather than through Nest's `send`, whose observables (a deferred connect, a
   * merge, the subscription) cost every tool call more than a contract check does; `send`
   * still works, for callers that want an observable.
   */
  request<Req, Rep, ReqInput>(call: ContractCall<Req, Rep, ReqInput>, payload: ReqInput): Promise<Rep> {
    return this.nats.request(call.contract, payload, { timeoutMs: call.timeoutMs, subject: call.subject });
  }

  /** Fire and forget, at once: a message that breaks its contract throws here, to the caller. */
  notify<T>(contract: EventContract<T>, payload: T): void {
    this.nats.publish(contract, payload);
  }

  connect(): Promise<NatsClient> {
    return Promise.resolve(this.nats);
  }

  close(): void {}

  unwrap<T>(): T {
    return this.nats as T;
  }

  protected publish(packet: ReadPacket<unknown>, callback: (packet: WritePacket) => void): () => void {
    this.request(packet.pattern as AnyCall, packet.data).then(
      (response) => callback({ response, isDisposed: true }),
      (err: unknown) => callback({ err }),
    );
    // A request on its way cannot be called back; an unsubscribed caller just ignores its reply.
    return () => undefined;
  }

  protected dispatchEvent<T>(packet: ReadPacket<unknown>): Promise<T> {
    this.nats.publish(packet.pattern as EventContract<unknown>, packet.data);
    return Promise.resolve(undefined as T);
  }
}
