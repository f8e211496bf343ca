import { CustomTransportStrategy, MessageHandler, Server } from '@nestjs/microservices';
import { isObservable, lastValueFrom } from 'rxjs';
import { NatsClient } from '../nats-client';
import { ContractContext } from './contract-context';
import { pinnedSubject, RpcError, rpcFailure } from '@app/contracts';
import { AnyEventContract, AnyRequestContract, ContractExtras, ContractPattern } from './contract-pattern';

/** Who this responder is on NATS: its connection, its id (pinned subjects, error replies) and its queue group. */
export interface NatsResponder {
  nats: Pick<NatsClient, 'respond' | 'subscribe' | 'flush'>;
  responderId: string;
  queue: string;
}

/**
 * A Nest transport over the NatsClient adapter: each `@AnswersContract` / `@ReceivesEvent`
 * method becomes a subscription on its contract's subject. Nest's stock NATS transport has
 * no per-responder subjects chosen at run time, no "no responders" answer and no contract
 * checks; this one keeps the adapter's (byte bounds, large messages in pieces, replies
 * checked, every request answered) and lets Nest run pipes and exception filters.
 *
 * The connection is a provider of the app, so it is attached after the app is built and
 * before `listen()`. Ready means subscribed: `listen()` reports ready only once the server
 * has confirmed every subscription (a flush), so no caller finds "no responders" after it.
 */
export class NatsContractServer extends Server implements CustomTransportStrategy {
  private responder?: NatsResponder;
  /** Every handler with the pattern it was declared with (Nest keeps only a string key). */
  private readonly bindings: Array<{ pattern: ContractPattern; handler: MessageHandler }> = [];

  attach(responder: NatsResponder): void {
    this.responder = responder;
  }

  override addHandler(pattern: ContractPattern, callback: MessageHandler, isEventHandler = false, extras: Record<string, unknown> = {}): void {
    super.addHandler(pattern, callback, isEventHandler, extras);
    this.bindings.push({ pattern, handler: callback });
  }

  listen(callback: (err?: unknown) => void): void {
    this.subscribeAll().then(
      () => callback(),
      (err: unknown) => callback(err),
    );
  }

  /** Nothing to undo here: the connection's owner drains it, which lets in-flight requests answer. */
  close(): void {}

  /** Status events are the adapter's business (it reconnects for ever); none are offered here. */
  on(): never {
    throw new Error('NatsContractServer has no events to listen to');
  }

  unwrap<T>(): T {
    return this.attached().nats as T;
  }

  private async subscribeAll(): Promise<void> {
    const { nats } = this.attached();
    for (const { pattern, handler } of this.bindings) {
      const { contract } = handler.extras as ContractExtras;
      if (handler.isEventHandler) this.receive(contract as AnyEventContract, pattern, handler);
      else this.answer(contract as AnyRequestContract, pattern, handler);
    }
    await nats.flush();
  }

  private answer(contract: AnyRequestContract, pattern: ContractPattern, handler: MessageHandler): void {
    const { nats, responderId, queue } = this.attached();
    const errorReply = (error: RpcError) => contract.errorReply(error, responderId);
    const options =
      pattern.route === 'pinned'
        ? { subject: pinnedSubject(contract.subject, responderId), responderId }
        : { queue: pattern.route === 'shared' ? queue : undefined, responderId };
    nats.respond(
      contract,
      async (payload, subject) => {
        const result: unknown = await handler(payload, new ContractContext([subject, errorReply]));
        return isObservable(result) ? lastValueFrom(result) : result;
      },
      options,
    );
  }

  private receive(contract: AnyEventContract, pattern: ContractPattern, handler: MessageHandler): void {
    const { nats, responderId } = this.attached();
    // An event has no reply: the filter's answer to a failed handler goes nowhere.
    const errorReply = (error: RpcError) => rpcFailure(error, responderId);
    nats.subscribe(contract, (payload) => {
      const context = new ContractContext([pattern.subject, errorReply]);
      void this.runEvent(handler, payload, context);
    });
  }

  /** Events have no reply; a handler's failure is the exception filter's to log. */
  private async runEvent(handler: MessageHandler, payload: unknown, context: ContractContext): Promise<void> {
    const result: unknown = await handler(payload, context);
    if (isObservable(result)) await lastValueFrom(result, { defaultValue: undefined });
  }

  private attached(): NatsResponder {
    if (!this.responder) throw new Error('NatsContractServer: attach() the NATS connection before listen()');
    return this.responder;
  }
}
