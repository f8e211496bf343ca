import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { pinnedWorkspaceFilesSubject, RpcFailure, workspaceFilesContract, WorkspaceFilesReply, WorkspaceFilesRequestInput } from '@app/contracts';
import { AppError, ErrorCode } from '@app/errors';
import { ByteStreamOffer, NATS_CLIENT, NatsClient, NatsTimeoutError, offerByteStream, pullByteStream } from '@app/messaging';
import type { Readable } from 'node:stream';
import { SshSessionBackends } from '../servers/ssh-session-backends';
import { SessionsRepository } from '../sessions/sessions.repository';
import { checkedImport, firstFileEntry, folderContents, packSingleFile, Sha256Counter, TAR_ENTRY_OVERHEAD, UploadRefusedError } from './workspace-tar';

/** A first request may make the session's sandbox (a container and its workspace disk). */
const OFFER_TIMEOUT_MS = 120_000;
/** An upload's answer comes once every byte is in; the byte stream's own time limits stop a stalled one sooner. */
const UPLOAD_TIMEOUT_MS = 60 * 60_000;
/** Once the executor has pulled the last byte, how long moving it into place may take. */
const COMMIT_TIMEOUT_MS = 180_000;
/** Entries one tar import may hold. */
const MAX_IMPORT_ENTRIES = 100_000;

type Ok = Extract<WorkspaceFilesReply, { ok: true }>;
/** A request before the gateway adds whose session it is. */
type Operation = WorkspaceFilesRequestInput extends infer R ? (R extends unknown ? Omit<R, 'tenant_id' | 'session_id' | 'backend'> : never) : never;

/**
 * Workspace files over HTTP, the gateway's half: finds the session's executor, streams
 * bytes to and from it over pulled byte streams (never one NATS message, never whole in
 * memory), makes and reads the tars Docker's archive API speaks, and turns the executor's
 * answers into HTTP errors. Paths are checked in the sandbox (docs/files-api.md).
 */
@Injectable()
export class WorkspaceFilesService {
  constructor(
    @Inject(NATS_CLIENT) private readonly nats: NatsClient,
    @Inject(RUNBOX_CONFIG) private readonly config: RunboxConfig,
    private readonly sessions: SessionsRepository,
    private readonly sshBackends: SshSessionBackends,
  ) {}

  get maxBytes(): number {
    return this.config.RUNBOX_FILES_MAX_BYTES;
  }

  async read(tenantId: string, sessionId: string, path: string): Promise<{ path: string; size: number; body: Readable }> {
    const reply = await this.ask(tenantId, sessionId, { op: 'read', path }, OFFER_TIMEOUT_MS);
    const tar = this.pull(reply, (reply.size ?? 0) + 4 * TAR_ENTRY_OVERHEAD);
    const entry = await firstFileEntry(tar).catch((err: unknown) => {
      tar.destroy();
      throw new AppError(ErrorCode.SandboxFailed, `the file could not be read from the sandbox: ${err instanceof Error ? err.message : String(err)}`);
    });
    // Whatever the consumer does with the body, the tar (and the executor's offer) goes with it.
    entry.body.on('close', () => tar.destroy());
    return { path: reply.path, size: entry.size, body: entry.body };
  }

  async write(tenantId: string, sessionId: string, path: string, body: Readable, size: number): Promise<{ path: string; size: number; sha256: string }> {
    let counter: Sha256Counter | undefined;
    const reply = await this.upload(tenantId, sessionId, (stream) => ({ op: 'write', path, size, stream }), () => {
      const packed = packSingleFile(body, size);
      counter = packed.counter;
      return packed;
    });
    return { path: reply.path, size: counter?.bytes ?? 0, sha256: counter?.hex() ?? '' };
  }

  async delete(tenantId: string, sessionId: string, path: string, recursive: boolean): Promise<{ path: string; kind: 'file' | 'dir' }> {
    const reply = await this.ask(tenantId, sessionId, { op: 'delete', path, recursive }, OFFER_TIMEOUT_MS);
    return { path: reply.path, kind: reply.kind ?? 'file' };
  }

  async exportFolder(tenantId: string, sessionId: string, path: string): Promise<{ path: string; tar: Readable }> {
    const reply = await this.ask(tenantId, sessionId, { op: 'export', path }, OFFER_TIMEOUT_MS);
    // A folder's tar is as large as the workspace holds; the workspace disk bounds it.
    return { path: reply.path, tar: folderContents(this.pull(reply, Number.MAX_SAFE_INTEGER)) };
  }

  async importFolder(tenantId: string, sessionId: string, path: string, body: Readable): Promise<{ path: string; entries: number }> {
    // Each entry may bring folders the archive left implicit: twice the entries' overhead.
    const maxTarBytes = this.maxBytes + 2 * (MAX_IMPORT_ENTRIES + 4) * TAR_ENTRY_OVERHEAD;
    let entries = () => 0;
    const reply = await this.upload(tenantId, sessionId, (stream) => ({ op: 'import', path, max_bytes: maxTarBytes, stream }), () => {
      const checked = checkedImport(body, { maxBytes: this.maxBytes, maxEntries: MAX_IMPORT_ENTRIES });
      entries = checked.entries;
      return checked;
    });
    return { path: reply.path, entries: entries() };
  }

  /**
   * Offers the tar `makeTar` builds from the body to the session's executor and waits for its answer. A refusal found while
   * streaming (the gateway's own checks) wins over the executor's account of the cut stream.
   */
  private async upload(
    tenantId: string,
    sessionId: string,
    request: (stream: string) => Operation,
    makeTar: () => { tar: Readable; refusal: () => UploadRefusedError | undefined },
  ): Promise<Ok> {
    const executorId = await this.route(tenantId, sessionId);
    // The body is read only from here on, once someone will pull what it becomes.
    const { tar, refusal } = makeTar();
    const offer = offerByteStream(this.nats.connection, tar);
    try {
      const reply = await this.untilDone(offer, this.send(tenantId, sessionId, executorId, request(offer.subject), UPLOAD_TIMEOUT_MS));
      const refused = refusal();
      if (refused) throw refusedError(refused);
      if (!reply.ok) throw failureError(reply);
      return reply;
    } catch (err) {
      const refused = refusal();
      if (refused) throw refusedError(refused);
      throw err;
    } finally {
      offer.abort('the transfer ended');
    }
  }

  /** The executor's answer; if the stream fails first (nobody pulls any more), a short wait for it, then an error. */
  private async untilDone(offer: ByteStreamOffer, reply: Promise<WorkspaceFilesReply>): Promise<WorkspaceFilesReply> {
    let streamError: unknown;
    const streamFailed = offer.done.then(
      () => new Promise<never>(() => undefined),
      (err: unknown) => {
        streamError = err;
        return new Promise<never>((_, reject) => setTimeout(() => reject(new AppError(ErrorCode.SandboxFailed, `the upload stopped: ${String(streamError)}`)), COMMIT_TIMEOUT_MS / 12).unref());
      },
    );
    return Promise.race([reply, streamFailed]);
  }

  private async ask(tenantId: string, sessionId: string, request: Operation, timeoutMs: number): Promise<Ok> {
    const executorId = await this.route(tenantId, sessionId);
    const reply = await this.send(tenantId, sessionId, executorId, request, timeoutMs);
    if (!reply.ok) throw failureError(reply);
    return reply;
  }

  private pull(reply: Ok, maxBytes: number): Readable {
    if (!reply.stream) throw new AppError(ErrorCode.SandboxFailed, 'the executor offered no bytes');
    return pullByteStream(this.nats.connection, reply.stream, { maxBytes });
  }

  /** The executor holding the session's sandbox (null: none yet, any executor makes one). */
  private async route(tenantId: string, sessionId: string): Promise<string | null> {
    const route = await this.sessions.toolRoute(tenantId, sessionId);
    if (!route) throw AppError.notFound('session', sessionId);
    const backend = await this.sshBackends.describe(tenantId, sessionId);
    if (backend) {
      throw new AppError(
        ErrorCode.UnsupportedBackend,
        `session ${sessionId} runs on the saved server ${backend.server ?? '(removed)'}, which has no workspace to serve files from; use vps_download and vps_upload to move files between it and a sandbox session`,
      );
    }
    return route.executorId;
  }

  private async send(tenantId: string, sessionId: string, executorId: string | null, request: Operation, timeoutMs: number): Promise<WorkspaceFilesReply> {
    const payload: WorkspaceFilesRequestInput = { ...request, tenant_id: tenantId, session_id: sessionId, backend: this.config.RUNBOX_SANDBOX_BACKEND };
    try {
      return await this.nats.request(workspaceFilesContract, payload, { timeoutMs, subject: executorId ? pinnedWorkspaceFilesSubject(executorId) : undefined });
    } catch (err) {
      if (err instanceof NatsTimeoutError) {
        const message = err.noResponders ? 'no executor is serving this session now' : 'the executor did not answer in time';
        throw new AppError(ErrorCode.ExecutorUnavailable, message, undefined, err.noResponders ? 5 : undefined);
      }
      throw err;
    }
  }
}

/** The executor's (or the sandbox agent's) failure codes as HTTP errors. */
function failureError(reply: RpcFailure): AppError {
  const { code, message } = reply.error;
  switch (code) {
    case 'not_found':
      return new AppError(ErrorCode.NotFound, message);
    case 'is_a_directory':
    case 'not_a_directory':
    case 'not_a_regular_file':
      return new AppError(ErrorCode.Conflict, message, { reason: code });
    case 'path_outside_workspace':
    case 'invalid_path':
    case 'bad_request':
      return new AppError(ErrorCode.ValidationFailed, message, { reason: code });
    case 'permission_denied':
      return new AppError(ErrorCode.Forbidden, message, { reason: code });
    case 'quota_exceeded':
      return new AppError(ErrorCode.QuotaExceeded, message, { limit: 'max_sandboxes' }, 30);
    case 'backend_mismatch':
    case 'backend_disabled':
      return new AppError(ErrorCode.UnsupportedBackend, `this session's sandbox backend cannot serve files over HTTP: ${message}`);
    default:
      return new AppError(ErrorCode.SandboxFailed, message, { reason: code });
  }
}

function refusedError(err: UploadRefusedError): AppError {
  if (err.reason === 'too_large') return new AppError(ErrorCode.PayloadTooLarge, `${err.message}; nothing was written`);
  return new AppError(ErrorCode.ValidationFailed, `${err.message}; nothing was written`, { reason: err.reason });
}
