import { Controller, INestMicroservice, Module, UseFilters } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Payload } from '@nestjs/microservices';
import { EventContract, pinnedSubject, pinnedToolCallSubject, RequestContract, rpcFailure, RpcFailure, TOOL_CALL_SUBJECT } from '@app/contracts';
import { AppError, ErrorCode } from '@app/errors';
import { LOGGER } from '@app/logging';
import { z } from 'zod';
import type { ServeOptions } from '../nats-client';
import { ContractExceptionFilter } from './contract-exception.filter';
import { AnswersContract, ReceivesEvent } from './contract-pattern';
import { ContractRequestPipe } from './contract-request.pipe';
import { NatsContractServer, NatsResponder } from './nats-contract.server';

const greetRequest = z.object({ name: z.string().min(1), punctuation: z.string().default('!') });
const greetReply = z.union([z.object({ ok: z.literal(true), greeting: z.string() }), z.object({ ok: z.literal(false), executor_id: z.string(), error: z.object({ code: z.string(), message: z.string() }) })]);
type GreetReply = z.infer<typeof greetReply>;
const greetContract: RequestContract<z.output<typeof greetRequest>, GreetReply, z.input<typeof greetRequest>> = {
  subject: 'test.greet.v1',
  request: greetRequest,
  reply: greetReply,
  errorReply: rpcFailure,
  maxBytes: 1024,
};
const noticeContract: EventContract<{ text: string }> = { subject: 'test.notice.v1', payload: z.object({ text: z.string() }), maxBytes: 1024 };

/** What the controller's service does for each name; set per test. */
const behaviour = { greet: (name: string, punctuation: string): string => `hello ${name}${punctuation}` };
/** Resolves with the next notice the controller receives. */
let onNotice: (text: string) => void = () => undefined;

@Controller()
@UseFilters(ContractExceptionFilter)
class GreetController {
  @AnswersContract(greetContract, 'shared', 'pinned')
  greet(@Payload(new ContractRequestPipe(greetContract)) request: z.output<typeof greetRequest>): GreetReply {
    return { ok: true, greeting: behaviour.greet(request.name, request.punctuation) };
  }

  @ReceivesEvent(noticeContract)
  notice(@Payload() message: { text: string }): void {
    onNotice(message.text);
  }
}

const logged: Array<{ fields: Record<string, unknown>; message: string }> = [];
const logger = { error: (fields: Record<string, unknown>, message: string) => logged.push({ fields, message }) };

@Module({ controllers: [GreetController], providers: [ContractExceptionFilter, { provide: LOGGER, useValue: logger }] })
class GreetModule {}

type Responder = (payload: unknown, subject: string) => Promise<unknown>;

/** The adapter as the transport sees it: records what it subscribes, and lets a test deliver messages. */
class FakeNats {
  readonly served: Array<{ subject: string; queue?: string; responderId: string; handler: Responder }> = [];
  readonly listeners = new Map<string, (payload: unknown) => void>();
  flushed = false;
  releaseFlush: () => void = () => undefined;

  respond(contract: { subject: string }, handler: Responder, options: ServeOptions): { unsubscribe(): void } {
    this.served.push({ subject: options.subject ?? contract.subject, queue: options.queue, responderId: options.responderId, handler });
    return { unsubscribe: () => undefined };
  }

  subscribe(contract: { subject: string }, onMessage: (payload: unknown) => void): { unsubscribe(): void } {
    this.listeners.set(contract.subject, onMessage);
    return { unsubscribe: () => undefined };
  }

  flush(): Promise<void> {
    return new Promise((resolve) => {
      this.releaseFlush = () => {
        this.flushed = true;
        resolve();
      };
    });
  }

  request(subject: string, payload: unknown): Promise<unknown> {
    const served = this.served.find((s) => s.subject === subject);
    if (!served) throw new Error(`nothing serves ${subject}`);
    return served.handler(payload, subject);
  }
}

describe('NatsContractServer', () => {
  let app: INestMicroservice;
  let nats: FakeNats;

  beforeEach(async () => {
    logged.length = 0;
    behaviour.greet = (name, punctuation) => `hello ${name}${punctuation}`;
    nats = new FakeNats();
    const transport = new NatsContractServer();
    app = await NestFactory.createMicroservice(GreetModule, { strategy: transport, logger: false });
    await app.init();
    transport.attach({ nats: nats as unknown as NatsResponder['nats'], responderId: 'exec-1', queue: 'test-group' });
    const listening = app.listen();
    // Ready means subscribed: listen() waits for the server to confirm the subscriptions.
    let ready = false;
    void listening.then(() => (ready = true));
    await Promise.resolve();
    expect(ready).toBe(false);
    nats.releaseFlush();
    await listening;
    expect(nats.flushed).toBe(true);
  });

  afterEach(() => app.close());

  it("subscribes each route: the shared subject in the queue group, the responder's own subject alone", () => {
    expect(nats.served.map(({ subject, queue, responderId }) => ({ subject, queue, responderId }))).toEqual([
      { subject: 'test.greet.v1', queue: 'test-group', responderId: 'exec-1' },
      { subject: pinnedSubject('test.greet.v1', 'exec-1'), queue: undefined, responderId: 'exec-1' },
    ]);
    // The subject a gateway sends a pinned session's calls to.
    expect(pinnedSubject(TOOL_CALL_SUBJECT, 'exec-1')).toBe(pinnedToolCallSubject('exec-1'));
  });

  it("hands the handler its request as the contract's request schema parsed it (defaults filled in)", async () => {
    await expect(nats.request('test.greet.v1', { name: 'ada' })).resolves.toEqual({ ok: true, greeting: 'hello ada!' });
    await expect(nats.request('test.greet.v1.exec-1', { name: 'ada', punctuation: '?' })).resolves.toEqual({ ok: true, greeting: 'hello ada?' });
  });

  it("answers a request that breaks the contract with the contract's error reply, naming the field, without running the handler", async () => {
    behaviour.greet = () => {
      throw new Error('the handler must not run');
    };
    const reply = (await nats.request('test.greet.v1', { name: '' })) as RpcFailure;
    expect(greetReply.parse(reply)).toEqual({ ok: false, executor_id: 'exec-1', error: { code: 'bad_request', message: expect.stringContaining('name:') } });
    expect(logged).toEqual([]);
  });

  it("maps an AppError to the contract's error reply with its code and message", async () => {
    behaviour.greet = (name) => {
      throw AppError.notFound('person', name);
    };
    await expect(nats.request('test.greet.v1', { name: 'ada' })).resolves.toEqual({
      ok: false,
      executor_id: 'exec-1',
      error: { code: ErrorCode.NotFound, message: 'person ada not found' },
    });
  });

  it('answers an unknown exception as internal_error with an error id, logged with the error but not sent', async () => {
    behaviour.greet = () => {
      throw new Error('secret detail');
    };
    const reply = (await nats.request('test.greet.v1', { name: 'ada' })) as RpcFailure;
    expect(reply).toMatchObject({ ok: false, executor_id: 'exec-1', error: { code: 'internal_error' } });
    expect(reply.error.message).not.toContain('secret detail');
    expect(logged).toHaveLength(1);
    const errorId = logged[0]?.fields.errorId;
    expect(typeof errorId).toBe('string');
    expect(reply.error.message).toContain(`error id ${String(errorId)}`);
    expect(logged[0]?.fields.err).toEqual(new Error('secret detail'));
  });

  it('delivers events to their handler', async () => {
    const received = new Promise<string>((resolve) => (onNotice = resolve));
    nats.listeners.get('test.notice.v1')?.({ text: 'restarting' });
    await expect(received).resolves.toBe('restarting');
  });
});
