import { EmbeddingsError, EmbeddingsProvider } from '../embeddings/embeddings.provider';
import { ReadOutcome, SandboxFileReader } from '../tools/sandbox-files';
import { DocumentToWrite, RagRepository } from './rag.repository';
import { RagIndexer } from './rag-indexer';

/** A workspace in memory, served the way SandboxFileReader reports it. */
function fakeReader(files: Record<string, Buffer | string>): SandboxFileReader {
  const paths = Object.keys(files).sort();
  return {
    async read(path: string, maxBytes: number): Promise<ReadOutcome> {
      if (files[path] !== undefined) {
        const bytes = Buffer.from(files[path]);
        return { kind: 'file', path, bytes: bytes.subarray(0, maxBytes), sizeBytes: bytes.length, truncated: bytes.length > maxBytes };
      }
      if (paths.some((p) => p.startsWith(`${path}/`))) return { kind: 'directory', path };
      return { kind: 'error', path, code: 'not_found', message: `not found: ${path}` };
    },
    async listFiles(folder: string) {
      return { paths: paths.filter((p) => p.startsWith(`${folder}/`)), complete: true };
    },
  } as unknown as SandboxFileReader;
}

class FakeRagRepository {
  readonly written: DocumentToWrite[] = [];
  removed: { root: string; keep: string[] } | null = null;
  constructor(private readonly indexed: Map<string, string> = new Map()) {}
  async indexedUnder() {
    return this.indexed;
  }
  async replaceDocuments(_t: string, _s: string, docs: DocumentToWrite[]) {
    this.written.push(...docs);
  }
  async removeOthers(_t: string, _s: string, root: string, keep: string[]) {
    this.removed = { root, keep: [...keep].sort() };
    return 1;
  }
}

const future = () => Date.now() + 60_000;

describe('RagIndexer', () => {
  const folder = {
    'docs/a.md': 'alpha\nbeta\n',
    'docs/b.md': 'gamma\n',
    'docs/logo.png': Buffer.from([0x89, 0x50, 0x00, 0x01]),
    'docs/huge.txt': 'x'.repeat(600 * 1024),
    'docs/.cache/old.md': 'stale\n',
    'docs/node_modules/p/index.js': 'module.exports = 1\n',
  };

  it('indexes the text files of a folder, reports what it skipped, and drops what is gone', async () => {
    const repo = new FakeRagRepository();
    const outcome = await new RagIndexer(repo as unknown as RagRepository).index(fakeReader(folder), 'ten_1', 'ses_1', 'docs', future());
    expect(outcome.ok).toBe(true);
    if (!outcome.ok) return;
    expect(outcome.report).toMatchObject({ root: 'docs', kind: 'directory', filesSeen: 4, indexed: 2, unchanged: 0, chunks: 2, ignored: 2, removed: 1 });
    expect(outcome.report.skipped).toEqual(
      expect.arrayContaining([
        { path: 'docs/logo.png', reason: 'binary (not UTF-8 text)' },
        { path: 'docs/huge.txt', reason: '600 KB, over the 512 KB limit' },
      ]),
    );
    expect(repo.written.map((d) => [d.path, d.lineCount, d.chunks])).toEqual(
      expect.arrayContaining([
        ['docs/a.md', 2, [{ startLine: 1, endLine: 2, content: 'alpha\nbeta' }]],
        ['docs/b.md', 1, [{ startLine: 1, endLine: 1, content: 'gamma' }]],
      ]),
    );
    expect(repo.removed).toEqual({ root: 'docs', keep: ['docs/a.md', 'docs/b.md'] });
  });

  it('does not rewrite a file whose bytes did not change', async () => {
    const first = new FakeRagRepository();
    await new RagIndexer(first as unknown as RagRepository).index(fakeReader(folder), 't', 's', 'docs', future());
    const known = new Map(first.written.map((d) => [d.path, d.sha256]));
    const second = new FakeRagRepository(known);
    const outcome = await new RagIndexer(second as unknown as RagRepository).index(fakeReader({ ...folder, 'docs/b.md': 'gamma!\n' }), 't', 's', 'docs', future());
    expect(outcome.ok && outcome.report).toMatchObject({ indexed: 1, unchanged: 1 });
    expect(second.written.map((d) => d.path)).toEqual(['docs/b.md']);
  });

  it('stops at the deadline or on cancel without removing anything, and says why', async () => {
    for (const [deadline, signal, why] of [
      [Date.now() - 1, undefined, /stopped at the time limit after 0 of 4 files/],
      [future(), AbortSignal.abort(), /cancelled after 0 of 4 files/],
    ] as const) {
      const repo = new FakeRagRepository();
      const outcome = await new RagIndexer(repo as unknown as RagRepository).index(fakeReader(folder), 't', 's', 'docs', deadline, signal);
      expect(outcome.ok && outcome.report.incomplete).toMatch(why);
      expect(repo.removed).toBeNull();
    }
  });

  it('reports a path that cannot be read, and an embeddings failure, as failures', async () => {
    const repo = new FakeRagRepository();
    expect(await new RagIndexer(repo as unknown as RagRepository).index(fakeReader(folder), 't', 's', 'nope', future())).toEqual({ ok: false, message: 'not found: nope' });
    const failing: EmbeddingsProvider = { model: 'm', embed: () => Promise.reject(new EmbeddingsError('embeddings (m): HTTP 500')) };
    const outcome = await new RagIndexer(repo as unknown as RagRepository, failing).index(fakeReader(folder), 't', 's', 'docs', future());
    expect(outcome).toEqual({ ok: false, message: 'embeddings (m): HTTP 500; files indexed before the failure are searchable' });
  });
});
