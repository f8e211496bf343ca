import { z, ZodType } from 'zod';
import { RpcError } from './tool-result';

/**
 * One NATS subject's whole contract: where it goes, what is sent, what comes back, what an
 * error looks like, and how many bytes a message may take. Both sides validate the
 * request and the reply with it (libs/messaging); nothing else names a subject's schemas.
 */
/** `Req` is a request as the responder sees it (defaults filled in), `ReqInput` as a caller may send it. */
export interface RequestContract<Req, Rep, ReqInput = Req> {
  readonly subject: string;
  readonly request: ZodType<Req, ReqInput>;
  readonly reply: ZodType<Rep>;
  /**
   * The reply for a request the responder could not handle (invalid, a handler failure, a
   * reply that could not be sent). It satisfies `reply`, so a caller always reads an error
   * it can act on rather than a validation failure of its own.
   */
  errorReply(error: RpcError, responderId: string): Rep;
  /** Bytes a request or reply may take once assembled; over the server's max_payload, it travels in pieces. */
  readonly maxBytes: number;
}

/** A subject that carries one-way messages (publish, or a JetStream stream). */
export interface EventContract<T> {
  readonly subject: string;
  readonly payload: ZodType<T>;
  /** Small by design: an event over the server's max_payload is refused, never split. */
  readonly maxBytes: number;
}

/** A responder's own subject for a contract (a session pinned to its executor): the contract's subject and the responder's id. */
export const pinnedSubject = (subject: string, responderId: string): string => `${subject}.${responderId}`;

/** The byte limit of contracts whose messages are a few ids. */
export const SMALL_MESSAGE_BYTES = 16 * 1024;

/** The reply every responder sends when it could not handle a request. */
export const rpcFailureSchema = z.object({ ok: z.literal(false), executor_id: z.string(), error: z.object({ code: z.string(), message: z.string() }) });
export type RpcFailure = z.infer<typeof rpcFailureSchema>;

export const rpcFailure = (error: RpcError, responderId: string): RpcFailure => ({ ok: false, executor_id: responderId, error });
