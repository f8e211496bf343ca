import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { LOGGER } from '@app/logging';
import type { Logger } from 'pino';
import { z } from 'zod';
import { GatewayTool, GatewayToolContext, GatewayToolResult, toolFailure, toolOutput } from '../tools/gateway-tool';
import { SandboxFiles } from '../tools/sandbox-files';
import { MAX_FILE_BYTES } from './file-rules';
import { formatBytes, IndexReport, RagIndexer } from './rag-indexer';

/** Time kept back from the tool's limit to write the last batch and answer. */
const WRAP_UP_MS = 5_000;
/** A single read never waits longer than this. */
const READ_TIMEOUT_MS = 60_000;
const SKIPPED_SHOWN = 20;

const parameters = z
  .object({
    path: z.string().min(1).max(4096).describe('A file or folder of the workspace ("." for all of it).'),
  })
  .strict();

type RagIndexArgs = z.infer<typeof parameters>;

/** rag_index: adds a workspace file or folder to the session's retrieval index. */
@Injectable()
export class RagIndexTool implements GatewayTool {
  readonly definition = {
    name: 'rag_index',
    description: `Add a file or a folder of the workspace to this session's search index, so rag_search can find passages in it. Indexing a path again replaces what was indexed there (changed files are re-read, deleted ones dropped). Text files only: binary files and files over ${formatBytes(MAX_FILE_BYTES)} are skipped and listed; hidden and dependency folders (node_modules) inside a folder are left out.`,
    parameters,
    mutating: true,
    toolsets: [],
    runsIn: 'gateway' as const,
    timeoutSeconds: 600,
  };

  constructor(
    private readonly files: SandboxFiles,
    private readonly indexer: RagIndexer,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  async execute(ctx: GatewayToolContext, args: RagIndexArgs): Promise<GatewayToolResult> {
    // The reader's ids name each read in the sandbox channel: they must be unique even for
    // two direct calls that start in the same millisecond.
    const callId = ctx.callId ?? `rag_index:${randomUUID()}`;
    const reader = this.files.reader({ ...ctx, callId, timeoutMs: Math.min(ctx.timeoutMs, READ_TIMEOUT_MS) });
    const deadline = Date.now() + Math.max(ctx.timeoutMs - WRAP_UP_MS, 1_000);
    const outcome = await this.indexer.index(reader, ctx.tenantId, ctx.sessionId, args.path, deadline, ctx.signal);
    const executorId = reader.executorId ?? undefined;
    if (!outcome.ok) return { ...toolFailure(`Cannot index ${args.path}: ${outcome.message}`), executorId };
    const r = outcome.report;
    this.logger.info(
      { tenantId: ctx.tenantId, sessionId: ctx.sessionId, runId: ctx.runId, files: r.filesSeen, indexed: r.indexed, chunks: r.chunks, skipped: r.skipped.length, complete: !r.incomplete, durationMs: r.durationMs },
      'workspace indexed',
    );
    return { ...toolOutput(describe(r), reportMetadata(r)), executorId };
  }
}

function describe(r: IndexReport): string {
  const where = r.kind === 'file' ? r.root : r.root === '.' ? 'the workspace' : `${r.root}/`;
  const counts = [
    `${r.indexed} new or changed (${r.chunks} chunks)`,
    `${r.unchanged} unchanged`,
    `${r.skipped.length} skipped`,
    ...(r.removed ? [`${r.removed} removed (no longer there)`] : []),
  ];
  const lines = [`Indexed ${where}: ${r.filesSeen} ${r.filesSeen === 1 ? 'file' : 'files'} read; ${counts.join(', ')}; ${(r.durationMs / 1000).toFixed(1)} s.`];
  if (r.skipped.length) {
    lines.push('Skipped:', ...r.skipped.slice(0, SKIPPED_SHOWN).map((s) => `- ${s.path}: ${s.reason}`));
    if (r.skipped.length > SKIPPED_SHOWN) lines.push(`- … and ${r.skipped.length - SKIPPED_SHOWN} more`);
  }
  if (r.ignored) lines.push(`Left out ${r.ignored} files in hidden or dependency folders (index such a folder by naming it).`);
  if (r.incomplete) lines.push(`Incomplete: ${r.incomplete}.`);
  lines.push('Search it with rag_search.');
  return lines.join('\n');
}

function reportMetadata(r: IndexReport): Record<string, unknown> {
  return {
    path: r.root,
    kind: r.kind,
    files_seen: r.filesSeen,
    files_indexed: r.indexed,
    files_unchanged: r.unchanged,
    chunks: r.chunks,
    removed: r.removed,
    skipped: r.skipped.slice(0, 100),
    skipped_count: r.skipped.length,
    ignored: r.ignored,
    complete: !r.incomplete,
    duration_ms: r.durationMs,
    write_ms: r.writeMs,
  };
}
