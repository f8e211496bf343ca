import { Inject, Injectable, Optional } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { EMBEDDINGS_PROVIDER, EmbeddingsError, EmbeddingsProvider } from '../embeddings/embeddings.provider';
import { SandboxFileReader } from '../tools/sandbox-files';
import { chunkLines } from './chunker';
import { decodeText, isIgnored, MAX_FILE_BYTES, MAX_FILES } from './file-rules';
import { DocumentToWrite, RagRepository } from './rag.repository';

/** Reads in flight at once: the sandbox agent serves each on its own thread. */
const READ_CONCURRENCY = 8;
/** Documents written per transaction, and the chunk count that also ends a batch. */
const BATCH_DOCUMENTS = 100;
const BATCH_CHUNKS = 800;
const WRITE_CONCURRENCY = 2;

export interface SkippedFile {
  path: string;
  reason: string;
}

export interface IndexReport {
  /** The path as the workspace names it ('.' for the whole workspace). */
  root: string;
  kind: 'file' | 'directory';
  filesSeen: number;
  indexed: number;
  unchanged: number;
  chunks: number;
  removed: number;
  skipped: SkippedFile[];
  /** Files under hidden or dependency folders, left out on purpose. */
  ignored: number;
  /** Set when the time limit or the file cap stopped the walk before the end. */
  incomplete?: string;
  durationMs: number;
  /** Of which writing to Postgres (and embedding), which overlaps with reading. */
  writeMs: number;
}

export type IndexOutcome = { ok: true; report: IndexReport } | { ok: false; message: string };

/**
 * rag_index's work: read a file or every file of a folder through the sandbox, chunk the
 * text ones, and replace what the index held for that path. Files whose bytes did not
 * change are not rewritten, so indexing the same folder again is mostly reading.
 */
@Injectable()
export class RagIndexer {
  constructor(
    private readonly rag: RagRepository,
    @Optional() @Inject(EMBEDDINGS_PROVIDER) private readonly embeddings: EmbeddingsProvider | null = null,
  ) {}

  async index(reader: SandboxFileReader, tenantId: string, sessionId: string, path: string, deadline: number, signal?: AbortSignal): Promise<IndexOutcome> {
    try {
      return await this.indexPath(reader, tenantId, sessionId, path, deadline, signal);
    } catch (err) {
      // Batches written before the failure stay indexed; the rest is as it was.
      if (err instanceof EmbeddingsError) return { ok: false, message: `${err.message}; files indexed before the failure are searchable` };
      throw err;
    }
  }

  private async indexPath(
    reader: SandboxFileReader,
    tenantId: string,
    sessionId: string,
    path: string,
    deadline: number,
    signal?: AbortSignal,
  ): Promise<IndexOutcome> {
    const started = Date.now();
    const first = await reader.read(path, MAX_FILE_BYTES);
    if (first.kind === 'error') return { ok: false, message: first.message };
    const root = first.path;
    const report: IndexReport = {
      root,
      kind: first.kind,
      filesSeen: 0,
      indexed: 0,
      unchanged: 0,
      chunks: 0,
      removed: 0,
      skipped: [],
      ignored: 0,
      durationMs: 0,
      writeMs: 0,
    };
    const known = await this.rag.indexedUnder(tenantId, sessionId, root);
    const kept: string[] = [];
    const writer = new BatchWriter(async (docs) => {
      const start = Date.now();
      await this.write(tenantId, sessionId, docs);
      report.writeMs += Date.now() - start;
    });

    const consider = async (file: string, read: Awaited<ReturnType<SandboxFileReader['read']>>) => {
      report.filesSeen++;
      const doc = this.prepare(file, read, report);
      if (!doc) return;
      kept.push(doc.path);
      if (known.get(doc.path) === doc.sha256) {
        report.unchanged++;
        return;
      }
      report.indexed++;
      report.chunks += doc.chunks.length;
      await writer.add(doc);
    };

    if (first.kind === 'file') {
      await consider(root, first);
    } else {
      const listing = await reader.listFiles(root, MAX_FILES);
      const prefix = root === '.' ? '' : `${root}/`;
      const files = listing.paths.filter((p) => {
        const ignored = isIgnored(p.slice(prefix.length));
        if (ignored) report.ignored++;
        return !ignored;
      });
      if (!listing.complete) report.incomplete = listing.note ?? `the folder holds more than ${MAX_FILES} files; only the first ${MAX_FILES} (in path order) were considered`;
      let next = 0;
      let failed = false;
      const worker = async () => {
        while (next < files.length && !failed) {
          if (signal?.aborted) {
            report.incomplete = `cancelled after ${report.filesSeen} of ${files.length} files`;
            return;
          }
          if (Date.now() > deadline) {
            report.incomplete = `stopped at the time limit after ${report.filesSeen} of ${files.length} files; run rag_index again to continue (unchanged files are quick)`;
            return;
          }
          const file = files[next++];
          try {
            await consider(file, await reader.read(file, MAX_FILE_BYTES));
          } catch (err) {
            failed = true; // the other workers stop too: the call is failing
            throw err;
          }
        }
      };
      await Promise.all(Array.from({ length: READ_CONCURRENCY }, worker));
    }
    await writer.flush();
    // An incomplete walk has not seen every file, so it cannot tell which ones are gone.
    if (!report.incomplete) report.removed = await this.rag.removeOthers(tenantId, sessionId, root, kept);
    report.durationMs = Date.now() - started;
    return { ok: true, report };
  }

  /** The document to store for one read, or null (with the reason recorded) when the file is skipped. */
  private prepare(path: string, read: Awaited<ReturnType<SandboxFileReader['read']>>, report: IndexReport): DocumentToWrite | null {
    if (read.kind === 'directory') return null; // a folder the listing raced with
    if (read.kind === 'error') {
      report.skipped.push({ path, reason: read.code === 'not_found' ? 'deleted while indexing' : read.message.split('\n')[0] });
      return null;
    }
    if (read.truncated || read.sizeBytes > MAX_FILE_BYTES) {
      report.skipped.push({ path, reason: `${formatBytes(read.sizeBytes)}, over the ${formatBytes(MAX_FILE_BYTES)} limit` });
      return null;
    }
    const decoded = decodeText(read.bytes);
    if (decoded.kind === 'binary') {
      report.skipped.push({ path, reason: 'binary (not UTF-8 text)' });
      return null;
    }
    const chunks = chunkLines(decoded.text);
    return {
      path: read.path,
      sha256: createHash('sha256').update(read.bytes).digest('hex'),
      sizeBytes: read.bytes.length,
      lineCount: decoded.text.split('\n').length - (decoded.text.endsWith('\n') ? 1 : 0),
      chunks,
    };
  }

  private async write(tenantId: string, sessionId: string, docs: DocumentToWrite[]): Promise<void> {
    if (this.embeddings) {
      const texts = docs.flatMap((d) => d.chunks.map((c) => `${d.path} lines ${c.startLine}-${c.endLine}\n${c.content}`));
      const vectors = await this.embeddings.embed(texts);
      let at = 0;
      for (const d of docs) {
        d.embeddings = vectors.slice(at, at + d.chunks.length);
        at += d.chunks.length;
      }
    }
    await this.rag.replaceDocuments(tenantId, sessionId, docs);
  }
}

/**
 * Collects documents and writes them a batch at a time, at most WRITE_CONCURRENCY batches
 * at once: the GIN index inserts are CPU work Postgres can spread over cores.
 */
class BatchWriter {
  private docs: DocumentToWrite[] = [];
  private chunks = 0;
  private readonly inFlight = new Set<Promise<void>>();
  private failure: unknown;

  constructor(private readonly write: (docs: DocumentToWrite[]) => Promise<void>) {}

  /** Queues a document; when that fills a batch, starts writing it and waits while too many writes are running (back-pressure). */
  async add(doc: DocumentToWrite): Promise<void> {
    this.docs.push(doc);
    this.chunks += doc.chunks.length;
    if (this.docs.length >= BATCH_DOCUMENTS || this.chunks >= BATCH_CHUNKS) await this.flush(WRITE_CONCURRENCY - 1);
  }

  /** Starts writing what is queued, then waits until at most `running` writes are left (0: all done). */
  async flush(running = 0): Promise<void> {
    const batch = this.docs;
    this.docs = [];
    this.chunks = 0;
    if (batch.length) {
      const write: Promise<void> = this.write(batch)
        .catch((err: unknown) => {
          this.failure ??= err;
        })
        .finally(() => this.inFlight.delete(write));
      this.inFlight.add(write);
    }
    while (this.inFlight.size > running) await Promise.race(this.inFlight);
    if (this.failure) throw this.failure;
  }
}

export function formatBytes(n: number): string {
  if (n >= 1024 * 1024) return `${(n / (1024 * 1024)).toFixed(1)} MB`;
  if (n >= 1024) return `${Math.round(n / 1024)} KB`;
  return `${n} bytes`;
}
