import { ScriptedModelServer } from '@app/testing';
import { TenantCredentials, TestStack } from './support/test-stack';

/**
 * The six file tools through the public API: POST /v1/sessions/{id}/tools/{name} → gateway
 * (zod) → NATS → executor → the sandbox agent in a real hardened container, and back. One
 * session (one container) serves the whole file; each test works in its own folder.
 */
describe('file tools', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let tenant: TenantCredentials;
  let sessionId: string;

  type ToolReply = { status: number; body: any; text: string };
  const tool = (name: string, args: Record<string, unknown>): Promise<ToolReply> =>
    stack.request('POST', `/v1/sessions/${sessionId}/tools/${name}`, { key: tenant.apiKey, body: { arguments: args } });

  /** A tool call that must succeed; returns its output. */
  const ok = async (name: string, args: Record<string, unknown>): Promise<ToolReply['body']> => {
    const res = await tool(name, args);
    if (res.status !== 200 || res.body.is_error) throw new Error(`${name} ${JSON.stringify(args).slice(0, 200)} failed: ${res.status} ${res.text.slice(0, 500)}`);
    return res.body;
  };

  /** Runs a shell command in the sandbox (to set up what the file tools must then cope with). */
  const sh = async (command: string): Promise<string> => {
    const body = await ok('terminal', { command, timeout_seconds: 120, max_wait_ms: 120_000 });
    if (!/^exit_code: 0$/m.test(body.output)) throw new Error(`setup command failed: ${command}\n${body.output}`);
    return body.output;
  };

  /** read_file's output minus its header line and the blank line after it: the file's bytes. */
  const contentOf = async (path: string): Promise<string> => {
    const body = await ok('read_file', { path });
    return body.output.slice(body.output.indexOf('\n\n') + 2);
  };

  beforeAll(async () => {
    const modelUrl = await model.start();
    stack = new TestStack({ env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1', RUNBOX_FILE_SEARCH_TIMEOUT: '45' } });
    await stack.start();
    tenant = await stack.createTenant();
    sessionId = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
  });

  describe('read_file', () => {
    it('returns a header, a blank line, then the bytes unaltered (tabs, CRLF, lone CR)', async () => {
      const content = 'first\tline\r\nsecond line\rstill second\n\tthird\n';
      await ok('write_file', { path: 'read/mixed.txt', content });
      const body = await ok('read_file', { path: 'read/mixed.txt' });
      expect(body.output).toBe(`read/mixed.txt — lines 1-3 of 3\n\n${content}`);
      expect(body.metadata).toEqual({ path: 'read/mixed.txt', first_line: 1, last_line: 3, total_lines: 3 });
      // An absolute path inside the workspace names the same file.
      expect((await ok('read_file', { path: '/workspace/read/mixed.txt' })).output).toBe(body.output);
    });

    it('pages with offset and limit and says how to continue', async () => {
      const lines = Array.from({ length: 10 }, (_, i) => `line ${i + 1}`);
      await ok('write_file', { path: 'read/ten.txt', content: lines.join('\n') + '\n' });
      const page = await ok('read_file', { path: 'read/ten.txt', offset: 3, limit: 2 });
      expect(page.output).toBe('read/ten.txt — lines 3-4 of 10\n\nline 3\nline 4\n… 6 more lines (use offset=5 to continue)');
      expect(page.metadata).toEqual({ path: 'read/ten.txt', first_line: 3, last_line: 4, total_lines: 10 });
      const last = await ok('read_file', { path: 'read/ten.txt', offset: 10 });
      expect(last.output).toBe('read/ten.txt — lines 10-10 of 10\n\nline 10\n');
      const past = await tool('read_file', { path: 'read/ten.txt', offset: 11 });
      expect(past.body.is_error).toBe(true);
      expect(past.body.output).toBe('offset 11 is past the end of read/ten.txt, which has 10 lines');
    });

    it('stops at 400 KB: total ≥N, "at least" note, truncated metadata, and refuses to page beyond the cap', async () => {
      // 10,000 lines of exactly 100 bytes (1 MB): the first 4,096 lines fill 400 KB exactly.
      await sh(`mkdir -p read && python3 -c "
import sys
with open('read/big.txt', 'w') as f:
    for i in range(1, 10001):
        f.write(('row %05d ' % i).ljust(99, '.') + '\\n')
"`);
      const body = await ok('read_file', { path: 'read/big.txt', offset: 4090, limit: 3 });
      const row = (n: number) => `row ${String(n).padStart(5, '0')} `.padEnd(99, '.');
      expect(body.output).toBe(
        `read/big.txt — lines 4090-4092 of ≥4096\n\n${row(4090)}\n${row(4091)}\n${row(4092)}\n` +
          '… at least 4 more lines (use offset=4093 to continue)\n… file truncated at 400 KB',
      );
      expect(body.metadata).toEqual({ path: 'read/big.txt', first_line: 4090, last_line: 4092, truncated: true, total_lines_at_least: 4096 });
      expect(body.metadata).not.toHaveProperty('total_lines');

      // Reaching the last counted line leaves only the cap note.
      const end = await ok('read_file', { path: 'read/big.txt', offset: 4096 });
      expect(end.output).toBe(`read/big.txt — lines 4096-4096 of ≥4096\n\n${row(4096)}\n… file truncated at 400 KB`);

      const beyond = await tool('read_file', { path: 'read/big.txt', offset: 5000 });
      expect(beyond.status).toBe(200);
      expect(beyond.body.is_error).toBe(true);
      expect(beyond.body.output).toMatch(/^offset 5000 is beyond the 400 KB read cap of read\/big\.txt/);
      expect(beyond.body.output).toMatch(/Use grep/);
      expect(beyond.body.metadata).toMatchObject({ error_code: 'offset_beyond_cap', total_lines_at_least: 4096 });
    });

    it('reports an image by format and resolution', async () => {
      // A real 3x2 RGB PNG, written by the sandbox's python (zlib-compressed scanlines, CRCs).
      await sh(`mkdir -p read && python3 -c "
import struct, zlib
def chunk(kind, data):
    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))
raw = b''.join(b'\\x00' + b'\\xff\\x00\\x00' * 3 for _ in range(2))
png = b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 3, 2, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b'')
open('read/pixel.png', 'wb').write(png)
"`);
      const size = Number((await sh('stat -c %s read/pixel.png')).match(/^(\d+)$/m)?.[1]);
      const body = await ok('read_file', { path: 'read/pixel.png' });
      expect(body.output).toBe(`read/pixel.png — PNG image, 3x2, ${size} bytes\n\n… image pixels are not returned as text, only the format and size`);
      expect(body.metadata).toEqual({ path: 'read/pixel.png', kind: 'image', format: 'PNG', size_bytes: size, width: 3, height: 2 });
    });

    it('returns the text of a PDF for a page range', async () => {
      await ok('write_file', { path: 'read/doc.pdf', content: minimalPdf(['Quarterly report', 'Revenue grew by nine percent', 'Appendix']) });
      const second = await ok('read_file', { path: 'read/doc.pdf', pages: '2' });
      expect(second.output).toBe('read/doc.pdf — PDF, pages 2 of 3\n\n--- page 2 ---\nRevenue grew by nine percent');
      expect(second.metadata).toMatchObject({ kind: 'pdf', total_pages: 3, pages: [2] });
      const all = await ok('read_file', { path: 'read/doc.pdf' });
      expect(all.output).toBe(
        'read/doc.pdf — PDF, pages 1-3 of 3\n\n--- page 1 ---\nQuarterly report\n\n--- page 2 ---\nRevenue grew by nine percent\n\n--- page 3 ---\nAppendix',
      );
    });

    it('answers a missing file, a folder and a binary file with clear tool errors', async () => {
      await sh('mkdir -p read/folder && printf "a\\0b" > read/blob.bin');
      const cases: Array<[string, RegExp]> = [
        ['read/nope.txt', /^not found: read\/nope\.txt \(no such file\)$/],
        ['read/folder', /^read\/folder is a directory, not a file; use list_files/],
        ['read/blob.bin', /^read\/blob\.bin looks like a binary file/],
      ];
      for (const [path, message] of cases) {
        const res = await tool('read_file', { path });
        expect(res.status).toBe(200);
        expect(res.body.is_error).toBe(true);
        expect(res.body.output).toMatch(message);
      }
    });
  });

  describe('write_file', () => {
    it('creates parent folders, overwrites, and reads back byte for byte', async () => {
      const created = await ok('write_file', { path: 'write/a/b/c/new.txt', content: 'héllo\r\nworld' });
      expect(created.output).toBe('Created write/a/b/c/new.txt (13 bytes written)');
      expect(created.metadata).toMatchObject({ path: 'write/a/b/c/new.txt', bytes_written: 13, created: true });
      expect(await contentOf('write/a/b/c/new.txt')).toBe('héllo\r\nworld');

      const over = await ok('write_file', { path: 'write/a/b/c/new.txt', content: 'short' });
      expect(over.output).toBe('Overwrote write/a/b/c/new.txt (5 bytes written); it was 13 bytes before');
      expect(over.metadata).toMatchObject({ created: false, action: 'overwrote' });
      expect(await contentOf('write/a/b/c/new.txt')).toBe('short');
      // Written as the sandbox user, never root.
      expect(await sh('stat -c %U:%G write/a/b/c/new.txt')).toMatch(/^sandbox:sandbox$/m);
    });

    it('refuses to write over a folder', async () => {
      await sh('mkdir -p write/dir');
      const res = await tool('write_file', { path: 'write/dir', content: 'x' });
      expect(res.body.is_error).toBe(true);
      expect(res.body.output).toBe('write/dir is a directory; give a file path');
    });
  });

  describe('edit_file', () => {
    const original = 'alpha\nbeta\nalpha\n';

    it('replaces exactly one occurrence', async () => {
      await ok('write_file', { path: 'edit/one.txt', content: original });
      const body = await ok('edit_file', { path: 'edit/one.txt', old_string: 'beta', new_string: 'BETA' });
      expect(body.output).toBe('Edited edit/one.txt: replaced 1 occurrence (first at line 2); the file is now 17 bytes.');
      expect(body.metadata).toMatchObject({ replacements: 1, first_line: 2, crlf_recovery: false });
      expect(await contentOf('edit/one.txt')).toBe('alpha\nBETA\nalpha\n');
    });

    it('tells "not found" from "found several times", and leaves the file untouched either way', async () => {
      await ok('write_file', { path: 'edit/two.txt', content: original });
      const missing = await tool('edit_file', { path: 'edit/two.txt', old_string: 'gamma', new_string: 'x' });
      expect(missing.status).toBe(200);
      expect(missing.body.is_error).toBe(true);
      expect(missing.body.metadata.error_code).toBe('anchor_not_found');
      expect(missing.body.output).toMatch(/^old_string was not found in edit\/two\.txt, so nothing was changed\..*read the file again/s);

      const several = await tool('edit_file', { path: 'edit/two.txt', old_string: 'alpha', new_string: 'x' });
      expect(several.body.is_error).toBe(true);
      expect(several.body.metadata).toMatchObject({ error_code: 'anchor_not_unique', occurrences: 2 });
      expect(several.body.output).toMatch(/^old_string occurs 2 times in edit\/two\.txt, so nothing was changed\..*replace_all/s);
      expect(several.body.output).not.toBe(missing.body.output);

      expect(await contentOf('edit/two.txt')).toBe(original);

      const all = await ok('edit_file', { path: 'edit/two.txt', old_string: 'alpha', new_string: 'omega', replace_all: true });
      expect(all.output).toMatch(/^Edited edit\/two\.txt: replaced 2 occurrences \(first at line 1\)/);
      expect(await contentOf('edit/two.txt')).toBe('omega\nbeta\nomega\n');
    });

    it('recovers an LF anchor in a CRLF file once, and says so', async () => {
      await ok('write_file', { path: 'edit/crlf.txt', content: 'one\r\ntwo\r\nthree\r\n' });
      const body = await ok('edit_file', { path: 'edit/crlf.txt', old_string: 'one\ntwo', new_string: 'uno\ndos' });
      expect(body.output).toMatch(/^Edited edit\/crlf\.txt: replaced 1 occurrence \(first at line 1\)/);
      expect(body.output).toMatch(/\nNote: the file uses CRLF line breaks .* converting its LF breaks to CRLF, and new_string was converted the same way\.$/);
      expect(body.metadata).toMatchObject({ crlf_recovery: true });
      expect(await contentOf('edit/crlf.txt')).toBe('uno\r\ndos\r\nthree\r\n');
    });

    it('writes new_string byte for byte when the anchor matched exactly in a CRLF file, noting the LF', async () => {
      await ok('write_file', { path: 'edit/crlf2.txt', content: 'one\r\ntwo\r\nthree\r\n' });
      const body = await ok('edit_file', { path: 'edit/crlf2.txt', old_string: 'three', new_string: 'tres\nmore' });
      expect(body.output).toMatch(/\nNote: the file uses CRLF line breaks but new_string contains LF-only breaks; they were written exactly as given \(LF\)/);
      expect(body.metadata).toMatchObject({ crlf_recovery: false, lf_into_crlf_file: true });
      expect(await contentOf('edit/crlf2.txt')).toBe('one\r\ntwo\r\ntres\nmore\r\n');
    });

    it('answers a missing file and a folder with clear tool errors', async () => {
      await sh('mkdir -p edit/folder');
      const missing = await tool('edit_file', { path: 'edit/nope.txt', old_string: 'a', new_string: 'b' });
      expect(missing.body).toMatchObject({ is_error: true, output: 'not found: edit/nope.txt (no such file)' });
      const folder = await tool('edit_file', { path: 'edit/folder', old_string: 'a', new_string: 'b' });
      expect(folder.body.is_error).toBe(true);
      expect(folder.body.output).toMatch(/^edit\/folder is a directory, not a file/);
    });
  });

  describe('list_files', () => {
    it('marks folders with a trailing slash and lists a whole tree when recursive', async () => {
      await sh('mkdir -p list/src/util list/empty && touch list/README.md list/src/main.ts list/src/util/str.ts');
      const flat = await ok('list_files', { path: 'list' });
      expect(flat.output).toBe('list/README.md\nlist/empty/\nlist/src/');
      const tree = await ok('list_files', { path: 'list', recursive: true });
      expect(tree.output).toBe('list/README.md\nlist/empty/\nlist/src/\nlist/src/main.ts\nlist/src/util/\nlist/src/util/str.ts');
      expect(tree.metadata).toMatchObject({ path: 'list', recursive: true, count: 6, total: 6, truncated: false });
      const file = await tool('list_files', { path: 'list/README.md' });
      expect(file.body).toMatchObject({ is_error: true, output: 'list/README.md is a file, not a directory; use read_file to read it' });
    });
  });

  describe('glob', () => {
    beforeAll(async () => {
      // Modification order (b, c, a, guide) differs from path order (guide, a, b, c).
      await sh(
        'mkdir -p glob/src/deep glob/docs && cd glob && ' +
          'touch -d "2021-01-01" src/a.ts && touch -d "2023-01-01" src/b.ts && touch -d "2022-01-01" src/deep/c.ts && ' +
          'touch -d "2020-01-01" docs/guide.md && cd ..',
      );
    });

    it('lists newest first by default, or in path order', async () => {
      const newest = await ok('glob', { pattern: 'glob/**/*.ts' });
      expect(newest.output).toBe('glob/src/b.ts\nglob/src/deep/c.ts\nglob/src/a.ts');
      expect(newest.metadata).toMatchObject({ sort: 'mtime', count: 3, total: 3, next_offset: null });
      const byPath = await ok('glob', { pattern: '**/*.ts', path: 'glob', sort: 'path' });
      expect(byPath.output).toBe('glob/src/a.ts\nglob/src/b.ts\nglob/src/deep/c.ts');
      const braces = await ok('glob', { pattern: 'glob/**/*.{md,ts}', sort: 'path' });
      expect(braces.output).toBe('glob/docs/guide.md\nglob/src/a.ts\nglob/src/b.ts\nglob/src/deep/c.ts');
    });

    it('pages with head_limit and offset, the footer giving next_offset', async () => {
      const first = await ok('glob', { pattern: 'glob/**/*', head_limit: 3 });
      expect(first.output).toBe('glob/src/b.ts\nglob/src/deep/c.ts\nglob/src/a.ts\n\n(results 1-3 of 4; more results: call again with offset=3)');
      expect(first.metadata).toMatchObject({ count: 3, total: 4, next_offset: 3, offset: 0 });
      const second = await ok('glob', { pattern: 'glob/**/*', head_limit: 3, offset: 3 });
      expect(second.output).toBe('glob/docs/guide.md\n\n(results 4-4 of 4; no more results)');
      expect(second.metadata).toMatchObject({ count: 1, next_offset: null });
      const byPath = await ok('glob', { pattern: 'glob/**/*', sort: 'path', head_limit: 2, offset: 1 });
      expect(byPath.output).toBe('glob/src/a.ts\nglob/src/b.ts\n\n(results 2-3 of 4; more results: call again with offset=3)');
      const none = await ok('glob', { pattern: 'glob/**/*.rs' });
      expect(none.output).toBe("No files match 'glob/**/*.rs' under .");
    });
  });

  describe('grep', () => {
    beforeAll(async () => {
      await ok('write_file', { path: 'grep/a.py', content: 'import os\nTODO: fix\nprint("todo")\n' });
      await ok('write_file', { path: 'grep/b.ts', content: '// TODO one\n// TODO two\n' });
      await ok('write_file', { path: 'grep/c.md', content: 'nothing here\n' });
    });

    it('lists matching files by default, counts, or shows path:line:text', async () => {
      const files = await ok('grep', { pattern: 'TODO', path: 'grep' });
      expect(files.output).toBe('grep/a.py\ngrep/b.ts');
      expect(files.metadata).toMatchObject({ output_mode: 'files_with_matches', files_matched: 2, total: 2 });
      const counts = await ok('grep', { pattern: 'TODO', path: 'grep', output_mode: 'count' });
      expect(counts.output).toBe('grep/a.py:1\ngrep/b.ts:2');
      const content = await ok('grep', { pattern: 'TODO', path: 'grep', output_mode: 'content' });
      expect(content.output).toBe('grep/a.py:2:TODO: fix\ngrep/b.ts:1:// TODO one\ngrep/b.ts:2:// TODO two');
    });

    it('filters by glob and matches case-insensitively when asked', async () => {
      const onlyPy = await ok('grep', { pattern: 'todo', path: 'grep', glob: '*.py', output_mode: 'content', case_insensitive: true });
      expect(onlyPy.output).toBe('grep/a.py:2:TODO: fix\ngrep/a.py:3:print("todo")');
      const sensitive = await ok('grep', { pattern: 'todo', path: 'grep', output_mode: 'content' });
      expect(sensitive.output).toBe('grep/a.py:3:print("todo")');
      const none = await ok('grep', { pattern: 'FIXME', path: 'grep' });
      expect(none.output).toBe("No matches for 'FIXME' under grep");
    });

    it('pages whole entries, with next_offset in the footer', async () => {
      const first = await ok('grep', { pattern: 'TODO', path: 'grep', output_mode: 'content', head_limit: 2 });
      expect(first.output).toBe('grep/a.py:2:TODO: fix\ngrep/b.ts:1:// TODO one\n\n(results 1-2 of 3; more results: call again with offset=2)');
      expect(first.metadata).toMatchObject({ next_offset: 2, total: 3 });
      const rest = await ok('grep', { pattern: 'TODO', path: 'grep', output_mode: 'content', head_limit: 2, offset: 2 });
      expect(rest.output).toBe('grep/b.ts:2:// TODO two\n\n(results 3-3 of 3; no more results)');
    });

    it('finds text past the 400 KB that read_file stops at', async () => {
      await sh(`mkdir -p grep/big && python3 -c "
with open('grep/big/log.txt', 'w') as f:
    for i in range(1, 10001):
        f.write('NEEDLE past the cap\\n' if i == 9000 else ('entry %05d ' % i).ljust(99, '-') + '\\n')
"`);
      const found = await ok('grep', { pattern: 'NEEDLE', path: 'grep/big', output_mode: 'content' });
      expect(found.output).toBe('grep/big/log.txt:9000:NEEDLE past the cap');
      const refused = await tool('read_file', { path: 'grep/big/log.txt', offset: 9000 });
      expect(refused.body.metadata.error_code).toBe('offset_beyond_cap');
    });

    it("gives the sandbox the operator's search deadline", async () => {
      // The agent reads RUNBOX_FILE_SEARCH_TIMEOUT from its environment; the executor sets it.
      expect(await sh('echo "deadline=$RUNBOX_FILE_SEARCH_TIMEOUT"')).toMatch(/^deadline=45$/m);
    });

    it('names the files it could not read in a footer', async () => {
      await sh('mkdir -p grep/locked && echo "TODO hidden" > grep/locked/secret.txt && echo "TODO open" > grep/locked/open.txt && chmod 000 grep/locked/secret.txt');
      const body = await ok('grep', { pattern: 'TODO', path: 'grep/locked' });
      expect(body.output).toBe('grep/locked/open.txt\n\n(files not searched or not shown: 1)\n  grep/locked/secret.txt: Permission denied (os error 13)');
    });
  });

  describe('containment', () => {
    const secrets = [/root:x:0:0/, /HOME=\/home\/sandbox/, /daemon:x:1:1/];

    beforeAll(async () => {
      await sh(
        'mkdir -p jail && cd jail && echo safe > safe.txt && ' +
          'ln -s /etc/passwd to-passwd && ln -s / to-root && ln -s /etc to-etc && ln -s to-passwd hop1 && ln -s hop1 hop2 && ' +
          'ln -s /nonexistent/target dangling && ln -s missing.txt dangling-in && ln -s ../.. up-twice && ln -s /tmp/owned to-tmp && ln -s /workspace/../etc/passwd sneaky && ' +
          'ln -s loop-b loop-a && ln -s loop-a loop-b && cd ..',
      );
    });

    const cases: Array<[string, string, Record<string, unknown>, RegExp]> = [
      ['.. to /etc/passwd', 'read_file', { path: '../etc/passwd' }, /outside the workspace/],
      ['many ..', 'read_file', { path: 'jail/../../../../../etc/passwd' }, /outside the workspace/],
      ['absolute /etc/passwd', 'read_file', { path: '/etc/passwd' }, /outside the workspace/],
      ['absolute /workspace/../etc', 'read_file', { path: '/workspace/../etc/passwd' }, /outside the workspace/],
      ['/proc/self/environ', 'read_file', { path: '/proc/self/environ' }, /outside the workspace/],
      ['/proc/self/root', 'read_file', { path: '/proc/self/root/etc/passwd' }, /outside the workspace/],
      ['symlink to /etc/passwd', 'read_file', { path: 'jail/to-passwd' }, /symbolic link jail\/to-passwd -> \/etc\/passwd points outside the workspace/],
      ['through a symlink to /', 'read_file', { path: 'jail/to-root/etc/passwd' }, /points outside the workspace/],
      ['through a symlink to /etc', 'read_file', { path: 'jail/to-etc/passwd' }, /points outside the workspace/],
      ['a chain of symlinks', 'read_file', { path: 'jail/hop2' }, /points outside the workspace/],
      ['a symlink with ../..', 'read_file', { path: 'jail/up-twice/etc/passwd' }, /points above the workspace root/],
      ['a symlink to /workspace/../etc', 'read_file', { path: 'jail/sneaky' }, /jail\/sneaky -> \/workspace\/\.\.\/etc\/passwd points above the workspace root/],
      ['a dangling symlink out', 'read_file', { path: 'jail/dangling' }, /points outside the workspace/],
      ['a dangling symlink inside', 'read_file', { path: 'jail/dangling-in' }, /symbolic link jail\/dangling-in -> missing\.txt is dangling/],
      ['write through a dangling symlink', 'write_file', { path: 'jail/dangling', content: 'x' }, /points outside the workspace/],
      ['a symlink loop', 'read_file', { path: 'jail/loop-a' }, /too many levels of symbolic links/],
      ['a 300-character name', 'read_file', { path: 'x'.repeat(300) }, /longer than 255 bytes/],
      ['write through ..', 'write_file', { path: '../escape.txt', content: 'x' }, /outside the workspace/],
      ['write to /tmp', 'write_file', { path: '/tmp/escape.txt', content: 'x' }, /outside the workspace/],
      ['write through a symlink to /tmp', 'write_file', { path: 'jail/to-tmp', content: 'x' }, /points outside the workspace/],
      ['write under a symlink to /', 'write_file', { path: 'jail/to-root/tmp/owned', content: 'x' }, /points outside the workspace/],
      ['edit through a symlink', 'edit_file', { path: 'jail/to-passwd', old_string: 'root', new_string: 'toor' }, /points outside the workspace/],
      ['list ..', 'list_files', { path: '..' }, /outside the workspace/],
      ['list /etc', 'list_files', { path: '/etc' }, /outside the workspace/],
      ['list through a symlink to /', 'list_files', { path: 'jail/to-root' }, /points outside the workspace/],
      ['glob from /etc', 'glob', { pattern: '*', path: '/etc' }, /outside the workspace/],
      ['glob with an absolute pattern', 'glob', { pattern: '/etc/*' }, /outside the workspace/],
      ['glob starting with ..', 'glob', { pattern: '../etc/*' }, /outside the workspace/],
      ['grep in /etc', 'grep', { pattern: 'root', path: '/etc' }, /outside the workspace/],
      ['grep through a symlink to /', 'grep', { pattern: 'root', path: 'jail/to-root' }, /points outside the workspace/],
      ['grep a symlinked file', 'grep', { pattern: 'root', path: 'jail/to-passwd' }, /points outside the workspace/],
      ['grep in /proc/self', 'grep', { pattern: 'HOME', path: '/proc/self' }, /outside the workspace/],
    ];

    it.each(cases)('refuses %s with a clear error and shows nothing from outside', async (_name, name, args, message) => {
      const res = await tool(name, args);
      expect(res.status).toBe(200);
      expect(res.body.is_error).toBe(true);
      expect(res.body.output).toMatch(message);
      for (const secret of secrets) expect(res.text).not.toMatch(secret);
    });

    it('refuses a NUL byte in a path before it reaches the sandbox: a 400 naming the argument', async () => {
      const res = await tool('read_file', { path: 'jail/safe.txt\u0000../../etc/passwd' });
      expect(res.status).toBe(400);
      expect(res.body.error.message).toMatch(/^body\.arguments\.path: contains a NUL character \(U\+0000\)/);
      for (const secret of secrets) expect(res.text).not.toMatch(secret);
    });

    it('wrote nothing outside the workspace', async () => {
      const out = await sh('ls /tmp/owned /tmp/escape.txt /escape.txt /nonexistent/target 2>&1; echo checked');
      expect(out).toMatch(/'\/tmp\/owned': No such file or directory/);
      expect(out).toMatch(/'\/tmp\/escape\.txt': No such file or directory/);
      expect(out).toMatch(/'\/nonexistent\/target': No such file or directory/);
    });

    it('searches and lists the workspace without following links out of it', async () => {
      const grep = await ok('grep', { pattern: 'root:x:0:0', path: 'jail' });
      expect(grep.output).toBe("No matches for 'root:x:0:0' under jail");
      const glob = await ok('glob', { pattern: 'jail/**/passwd' });
      expect(glob.output).toBe("No files match 'jail/**/passwd' under .");
      const list = await ok('list_files', { path: 'jail', recursive: true });
      expect(list.output).toContain('jail/to-root -> /');
      expect(list.output).not.toMatch(/jail\/to-root\/|jail\/to-etc\//);
    });

    it('never follows a symlink swapped in while reads are in flight', async () => {
      // A loop in the sandbox flips jail/flip between a workspace file and /etc/passwd while
      // reads run: each read sees the safe file or is refused, never the host file.
      await sh('cd jail && ln -sfn safe.txt flip && cd ..');
      const flipper = await ok('terminal', {
        command: 'cd jail && for i in $(seq 1 4000); do ln -sfn /etc/passwd flip.new && mv -T flip.new flip; ln -sfn safe.txt flip.new && mv -T flip.new flip; done; cd ..',
        max_wait_ms: 250,
      });
      const reads = await Promise.all(Array.from({ length: 60 }, () => tool('read_file', { path: 'jail/flip' })));
      for (const res of reads) {
        expect(res.status).toBe(200);
        for (const secret of secrets) expect(res.text).not.toMatch(secret);
        if (res.body.is_error) {
          expect(res.body.output).toMatch(/outside the workspace|symbolic link/);
        } else {
          expect(res.body.output).toBe('jail/flip — lines 1-1 of 1\n\nsafe\n');
        }
      }
      const pid = flipper.metadata.pid as number | undefined;
      if (pid) await ok('terminal', { command: `kill -- -${pid} 2>/dev/null; true` });
    });
  });

  describe('bad arguments', () => {
    const expectValidation = (res: ToolReply, field: RegExp) => {
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
      expect(res.body.error.message).toMatch(field);
    };

    it('answers a missing or mistyped argument with 400 naming the field', async () => {
      expectValidation(await tool('read_file', {}), /arguments\.path/);
      expectValidation(await tool('read_file', { path: 42 }), /arguments\.path/);
      expectValidation(await tool('read_file', { path: 'a', offset: 'ten' }), /arguments\.offset/);
      expectValidation(await tool('read_file', { path: 'a', limit: 0 }), /arguments\.limit/);
      expectValidation(await tool('read_file', { path: '' }), /arguments\.path/);
      expectValidation(await tool('write_file', { path: 'a.txt' }), /arguments\.content/);
      expectValidation(await tool('edit_file', { path: 'a.txt', new_string: 'x' }), /arguments\.old_string/);
      expectValidation(await tool('edit_file', { path: 'a.txt', old_string: 'a', new_string: 'b', replace_all: 'yes' }), /arguments\.replace_all/);
      expectValidation(await tool('list_files', { recursive: 'deep' }), /arguments\.recursive/);
      expectValidation(await tool('glob', { pattern: '*', sort: 'size' }), /arguments\.sort/);
      expectValidation(await tool('glob', { pattern: '*', head_limit: -1 }), /arguments\.head_limit/);
      expectValidation(await tool('grep', { pattern: 'x', output_mode: 'lines' }), /arguments\.output_mode/);
      expectValidation(await tool('grep', {}), /arguments\.pattern/);
      expectValidation(await tool('read_file', { path: 'a', surprise: true }), /surprise/);
    });

    it('answers a bad regular expression as a tool error, not a 500', async () => {
      const res = await tool('grep', { pattern: '(unclosed' });
      expect(res.status).toBe(200);
      expect(res.body.is_error).toBe(true);
      expect(res.body.output).toMatch(/^invalid regular expression/);
    });

    it('answers an unknown tool with 404', async () => {
      const res = await tool('read_everything', { path: 'a' });
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('not_found');
    });
  });

  describe('in a run', () => {
    it('runs a turn\'s edits of one file in order and edits of another file beside them', async () => {
      await ok('write_file', { path: 'turn/chain.txt', content: 'step 0\n' });
      await ok('write_file', { path: 'turn/other.txt', content: 'a0\n' });
      // Each edit's old_string exists only after the previous edit on that file: out of
      // order, one of them would fail with "not found". Spellings of the path vary.
      const chainPaths = ['turn/chain.txt', './turn/chain.txt', '/workspace/turn/chain.txt', 'turn//chain.txt', 'turn/./chain.txt'];
      const calls = [
        ...chainPaths.map((path, i) => ({ name: 'edit_file', arguments: { path, old_string: `step ${i}`, new_string: `step ${i + 1}` } })),
        { name: 'edit_file', arguments: { path: 'turn/other.txt', old_string: 'a0', new_string: 'a1' } },
        { name: 'edit_file', arguments: { path: 'turn/other.txt', old_string: 'a1', new_string: 'a2' } },
      ];
      // Interleave the two files' calls, as a model would.
      const order = [0, 5, 1, 2, 6, 3, 4];
      model.enqueue({ toolCalls: order.map((i, n) => ({ id: `edit_${n}`, ...calls[i] })) }, { content: 'edited' });
      const created = await stack.request('POST', '/v1/runs', { key: tenant.apiKey, body: { session_id: sessionId, input: 'make the edits' } });
      expect(created.status).toBe(202);
      const run = await stack.waitForRun(tenant.apiKey, created.body.id);
      expect(run.status).toBe('completed');

      const messages = (await stack.request('GET', `/v1/sessions/${sessionId}/messages`, { key: tenant.apiKey })).body.data;
      const results = messages.filter((m: { run_id: string; role: string }) => m.run_id === created.body.id && m.role === 'tool');
      expect(results).toHaveLength(7);
      for (const m of results) expect(m.content).toMatch(/^Edited turn\/(chain|other)\.txt: replaced 1 occurrence/);
      expect(await contentOf('turn/chain.txt')).toBe('step 5\n');
      expect(await contentOf('turn/other.txt')).toBe('a2\n');
    });

    it('runs calls with nothing in common at the same time', async () => {
      // The terminal call waits for a file that only the later write_file call creates: it
      // finishes only if the two run concurrently (in sequence it would wait out its loop).
      model.enqueue(
        {
          toolCalls: [
            {
              id: 'wait_for_flag',
              name: 'terminal',
              arguments: { command: '(for i in $(seq 1 600); do if [ -f turn/flag ]; then echo rendezvous; break; fi; sleep 0.1; done)', max_wait_ms: 90_000, timeout_seconds: 120 },
            },
            { id: 'raise_flag', name: 'write_file', arguments: { path: 'turn/flag', content: 'up' } },
          ],
        },
        { content: 'done' },
      );
      const created = await stack.request('POST', '/v1/runs', { key: tenant.apiKey, body: { session_id: sessionId, input: 'rendezvous' } });
      const run = await stack.waitForRun(tenant.apiKey, created.body.id, undefined, 120_000);
      expect(run.status).toBe('completed');
      const messages = (await stack.request('GET', `/v1/sessions/${sessionId}/messages`, { key: tenant.apiKey })).body.data;
      const waited = messages.find((m: { tool_call_id?: string; run_id: string }) => m.run_id === created.body.id && m.tool_call_id === 'wait_for_flag');
      expect(waited.content).toMatch(/^stdout:\nrendezvous$/m);
    });
  });
});

/** A small text PDF (one uncompressed content stream per page) with a correct xref table. */
function minimalPdf(pages: string[]): string {
  const objects: string[] = [];
  const pageIds = pages.map((_, i) => 3 + i * 2);
  objects[1] = '<< /Type /Catalog /Pages 2 0 R >>';
  objects[2] = `<< /Type /Pages /Kids [${pageIds.map((id) => `${id} 0 R`).join(' ')}] /Count ${pages.length} >>`;
  const fontId = 3 + pages.length * 2;
  pages.forEach((text, i) => {
    const stream = `BT /F1 12 Tf 72 720 Td (${text}) Tj ET`;
    objects[pageIds[i]] = `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 ${fontId} 0 R >> >> /Contents ${pageIds[i] + 1} 0 R >>`;
    objects[pageIds[i] + 1] = `<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`;
  });
  objects[fontId] = '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>';
  let pdf = '%PDF-1.4\n';
  const offsets: number[] = [];
  for (let id = 1; id < objects.length; id++) {
    offsets[id] = pdf.length;
    pdf += `${id} 0 obj\n${objects[id]}\nendobj\n`;
  }
  const xref = pdf.length;
  pdf += `xref\n0 ${objects.length}\n0000000000 65535 f \n`;
  for (let id = 1; id < objects.length; id++) pdf += `${String(offsets[id]).padStart(10, '0')} 00000 n \n`;
  pdf += `trailer\n<< /Size ${objects.length} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return pdf;
}
