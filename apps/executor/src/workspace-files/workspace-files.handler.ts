import { RpcFailure, ToolResult, WorkspaceFilesReply, WorkspaceFilesRequest } from '@app/contracts';
import { offerByteStream, pullByteStream } from '@app/messaging';
import type { NatsConnection } from 'nats';
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { z } from 'zod';
import { sandboxFailure } from '../sandbox/sandbox-failure';
import { WORKSPACE } from '../sandbox/sandbox-policy';
import { CallTarget, SandboxService } from '../sandbox/sandbox.service';
import { ContainerArchives } from './container-archives';

/** Resolving a path, staging, committing: quick ops of the agent. */
const AGENT_OP_TIMEOUT_MS = 30_000;
/** Deleting or moving a large tree takes longer. */
const AGENT_TREE_OP_TIMEOUT_MS = 120_000;
/** A one-entry tar: a header, padding to 512 bytes, two empty end blocks (and a pax header at most). */
const SINGLE_ENTRY_TAR_OVERHEAD = 4096;

const statSchema = z.object({ path: z.string(), canonical: z.string(), kind: z.enum(['file', 'dir']), size: z.number().int().min(0) });
const stagedSchema = z.object({ path: z.string(), staging: z.string().min(1) });
const committedSchema = z.object({ path: z.string() });
const deletedSchema = z.object({ path: z.string(), kind: z.enum(['file', 'dir']) });

/** An answer of the sandbox agent that is a failure to pass on as it is (its code and message). */
class AgentRefusal extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The executor's half of the workspace-files contract. Paths are resolved by the sandbox
 * agent (runbox_tools/workspace_files.py, with the file tools' containment rules); the
 * bytes move between Docker's archive API and a pulled NATS byte stream, a chunk at a
 * time. Uploads land in a staging folder the agent made and are moved into place by it
 * only once Docker has extracted every byte; on any failure the staging folder is removed.
 * The session's sandbox is made (or started again) if it has none.
 */
export class WorkspaceFilesHandler {
  constructor(
    private readonly sandboxes: SandboxService,
    private readonly archives: ContainerArchives,
    private readonly nats: NatsConnection,
    private readonly logger: Logger,
  ) {}

  async handle(req: WorkspaceFilesRequest): Promise<WorkspaceFilesReply> {
    const executor_id = this.sandboxes.executorId;
    const fail = (code: string, message: string): RpcFailure => ({ ok: false, executor_id, error: { code, message } });
    if (!this.sandboxes.supports(req.backend)) return fail('backend_disabled', `this executor does not run the ${req.backend} backend`);
    const target: CallTarget = { tenantId: req.tenant_id, sessionId: req.session_id, backend: req.backend };
    try {
      switch (req.op) {
        case 'read':
          return await this.offer(target, async (containerId, answer) => {
            const found = await this.agent(target, 'files_stat', { path: req.path }, statSchema);
            if (found.kind !== 'file') throw new AgentRefusal('is_a_directory', `${found.path} is a folder; download it with GET /archive?path=`);
            const tar = await this.archives.read(containerId, inWorkspace(found.canonical));
            return answer(tar, { path: found.path, size: found.size });
          });
        case 'export':
          return await this.offer(target, async (containerId, answer) => {
            const found = await this.agent(target, 'files_stat', { path: req.path }, statSchema);
            if (found.kind !== 'dir') throw new AgentRefusal('not_a_directory', `${found.path} is a file; download it with GET /files/${found.path}`);
            const tar = await this.archives.read(containerId, inWorkspace(found.canonical));
            return answer(tar, { path: found.path });
          });
        case 'write':
          return { ok: true, executor_id, ...(await this.upload(target, 'file', req.path, req.stream, req.size + SINGLE_ENTRY_TAR_OVERHEAD, req.size)) };
        case 'import':
          return { ok: true, executor_id, ...(await this.upload(target, 'dir', req.path, req.stream, req.max_bytes)) };
        case 'delete': {
          const deleted = await this.agent(target, 'files_delete', { path: req.path, recursive: req.recursive }, deletedSchema, AGENT_TREE_OP_TIMEOUT_MS);
          return { ok: true, executor_id, path: deleted.path, kind: deleted.kind };
        }
      }
    } catch (err) {
      if (err instanceof AgentRefusal) return fail(err.code, err.message);
      const failure = sandboxFailure(err);
      if (!failure) throw err;
      this.logger.warn({ tenantId: req.tenant_id, sessionId: req.session_id, op: req.op, reason: failure.message }, 'workspace files op failed');
      return fail(failure.code, failure.message);
    }
  }

  /**
   * Runs `work` with the session's container; it offers a tar for pulling and the reply goes
   * at once, while the container stays counted as in use until the receiver has it all.
   */
  private offer(
    target: CallTarget,
    work: (containerId: string, answer: (tar: Readable, reply: { path: string; size?: number }) => Promise<void>) => Promise<void>,
  ): Promise<WorkspaceFilesReply> {
    return new Promise((resolve, reject) => {
      let answered = false;
      const answer = async (tar: Readable, reply: { path: string; size?: number }) => {
        const offer = offerByteStream(this.nats, tar);
        answered = true;
        resolve({ ok: true, executor_id: this.sandboxes.executorId, ...reply, stream: offer.subject });
        await offer.done.catch((err: unknown) => {
          this.logger.info({ tenantId: target.tenantId, sessionId: target.sessionId, reason: err instanceof Error ? err.message : String(err) }, 'a workspace download stopped early');
        });
      };
      this.sandboxes.withContainer(target, (containerId) => work(containerId, answer)).then(
        () => (answered ? undefined : reject(new Error('the download was never offered'))),
        (err: unknown) => (answered ? undefined : reject(err)),
      );
    });
  }

  /** Pulls the gateway's tar into a staging folder, then has the agent move it into place. */
  private upload(target: CallTarget, kind: 'file' | 'dir', path: string, stream: string, maxBytes: number, size?: number) {
    return this.sandboxes.withContainer(target, async (containerId) => {
      const staged = await this.agent(target, 'files_stage', { path, kind }, stagedSchema);
      try {
        const source = pullByteStream(this.nats, stream, { maxBytes });
        try {
          await this.archives.write(containerId, inWorkspace(staged.staging), source);
        } finally {
          source.destroy();
        }
        const args = { path, kind, staging: staged.staging, ...(size !== undefined ? { size } : {}) };
        const committed = await this.agent(target, 'files_commit', args, committedSchema, AGENT_TREE_OP_TIMEOUT_MS);
        return { path: committed.path, ...(size !== undefined ? { size } : {}) };
      } catch (err) {
        await this.agent(target, 'files_discard', { staging: staged.staging }, z.object({}), AGENT_TREE_OP_TIMEOUT_MS).catch((discardErr: unknown) =>
          this.logger.warn({ tenantId: target.tenantId, sessionId: target.sessionId, staging: staged.staging, reason: String(discardErr) }, 'a staging folder was left behind'),
        );
        if (err instanceof AgentRefusal || sandboxFailure(err)) throw err;
        throw new AgentRefusal('transfer_failed', `the upload did not complete, so nothing was written: ${err instanceof Error ? err.message : String(err)}`);
      }
    });
  }

  private async agent<T extends z.ZodType>(target: CallTarget, op: string, args: Record<string, unknown>, answer: T, timeoutMs = AGENT_OP_TIMEOUT_MS): Promise<z.output<T>> {
    const result: ToolResult = await this.sandboxes.call(target, op, args, timeoutMs);
    if (result.is_error) throw new AgentRefusal(typeof result.metadata.error_code === 'string' ? result.metadata.error_code : 'sandbox_failed', result.output);
    const parsed = answer.safeParse(result.metadata);
    if (!parsed.success) throw new AgentRefusal('sandbox_failed', `the sandbox answered ${op} with a result of the wrong shape`);
    return parsed.data;
  }
}

/** The container's path of a canonical workspace path ("." is the workspace itself). */
function inWorkspace(canonical: string): string {
  return canonical === '.' ? WORKSPACE : `${WORKSPACE}/${canonical}`;
}
