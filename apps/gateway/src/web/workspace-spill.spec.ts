import { SandboxFileReader } from '../tools/sandbox-files';
import { fitOrSpill, spillPath } from './workspace-spill';

/** Records writes instead of reaching a sandbox. */
function fakeFiles(): SandboxFileReader & { written: Map<string, Buffer> } {
  const written = new Map<string, Buffer>();
  const files = { written, write: async (path: string, bytes: Buffer) => (written.set(path, bytes), { ok: true as const, path }) };
  return files as unknown as SandboxFileReader & { written: Map<string, Buffer> };
}

describe('fitOrSpill', () => {
  it('returns a text within the budget as it is, writing nothing', async () => {
    const files = fakeFiles();
    expect(await fitOrSpill(files, 'short', 100, 'x.md')).toEqual({ spilled: false, output: 'short' });
    expect(files.written.size).toBe(0);
  });

  it('saves a long text whole and answers with its head, cut at a line, and where to continue', async () => {
    const files = fakeFiles();
    const lines = Array.from({ length: 500 }, (_, i) => `line ${i + 1} ${'x'.repeat(40)}`);
    const text = lines.join('\n');
    const outcome = await fitOrSpill(files, text, 2_000, '.runbox/web/h-1.md');
    if (!outcome.spilled) throw new Error('expected a spill');
    expect(files.written.get('.runbox/web/h-1.md')?.toString()).toBe(text);
    expect(outcome.output.length).toBeLessThanOrEqual(2_000);
    const head = outcome.output.slice(0, outcome.output.indexOf('\n\n…'));
    expect(head).toBe(lines.slice(0, outcome.nextOffset - 1).join('\n'));
    expect(outcome.output).toContain(`read_file path=".runbox/web/h-1.md" offset=${outcome.nextOffset}`);
    expect(outcome).toMatchObject({ totalChars: text.length, totalLines: 500 });
  });

  it('names spill files by host and a hash of the URL', () => {
    expect(spillPath('https://Docs.Example.com/a?b', 'md')).toMatch(/^\.runbox\/web\/docs\.example\.com-[0-9a-f]{12}\.md$/);
    expect(spillPath('https://a.example/1', 'md')).not.toBe(spillPath('https://a.example/2', 'md'));
  });
});
