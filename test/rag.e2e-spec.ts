import { ScriptedModelServer } from '@app/testing';
import { callTool, runToolCalls } from './support/tool-runs';
import { TenantCredentials, TestStack } from './support/test-stack';

/**
 * rag_index and rag_search over a folder generated in a real sandbox: files are read
 * through the executor and the sandbox agent, chunks ranked by Postgres full text.
 */
describe('retrieval over the workspace (rag_index, rag_search)', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let tenant: TenantCredentials;
  let sessionId: string;

  beforeAll(async () => {
    const modelUrl = await model.start();
    stack = await new TestStack({ env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1' } }).start();
    tenant = await stack.createTenant();
    sessionId = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
    // 120 markdown files of filler, one fact at a known line, and files rag_index must skip.
    const generate = await callTool(stack, tenant.apiKey, sessionId, 'terminal', {
      command: `python3 - <<'EOF'
import os, random
random.seed(7)
words = "alpha beta gamma delta service queue worker cache token schema index shard replica cluster".split()
for i in range(120):
    path = "docs/%s/file-%03d.md" % (["ops", "api", "guides"][i % 3], i)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    lines = ["# Document %d" % i] + [" ".join(random.choice(words) for _ in range(10)) for _ in range(99)]
    if i == 77:
        lines[40] = "The retry budget for the payment gateway is seven attempts."
    if i == 31:
        lines[10] = "function computeShippingCost(order) { return order.weight * RATE }"
    if i == 45:
        lines[5] = "支付网关的重试预算是七次。"
    open(path, "w").write("\\n".join(lines) + "\\n")
os.makedirs("docs/assets", exist_ok=True)
open("docs/assets/logo.bin", "wb").write(bytes(range(256)) * 8)
open("docs/big.log", "w").write("x" * 80 + "\\n" * 1 + ("log line\\n" * 80000))
os.makedirs("docs/.cache", exist_ok=True)
open("docs/.cache/stale.md", "w").write("retry budget stale copy\\n")
os.makedirs("docs/node_modules/pkg", exist_ok=True)
open("docs/node_modules/pkg/README.md", "w").write("retry budget vendored copy\\n")
os.makedirs("notes", exist_ok=True)
open("notes/cars.md", "w").write("The automobile needs new tyres before winter.\\n")
EOF`,
    });
    expect(generate.metadata.exit_code).toBe(0);
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
  });

  it('finds the right file and lines after indexing a folder, and the new text after an edit', async () => {
    const { results } = await runToolCalls(
      stack,
      model,
      tenant.apiKey,
      [
        { name: 'rag_index', arguments: { path: 'docs' } },
        { name: 'rag_search', arguments: { query: 'retry budget of the payment gateway' } },
      ],
      { session_id: sessionId, enabled: ['rag_index'] },
    );
    const [indexed, searched] = results;
    expect(indexed.is_error).toBe(false);
    expect(indexed.metadata).toMatchObject({ path: 'docs', kind: 'directory', files_indexed: 120, files_unchanged: 0, skipped_count: 2, ignored: 2, complete: true });
    expect(indexed.output).toContain('- docs/assets/logo.bin: binary');
    expect(indexed.output).toMatch(/- docs\/big\.log: .* over the 512 KB limit/);

    expect(searched.is_error).toBe(false);
    const top = searched.metadata.results[0];
    expect(top).toMatchObject({ path: 'docs/guides/file-077.md', match: 'text' });
    expect(top.start_line).toBeLessThanOrEqual(41);
    expect(top.end_line).toBeGreaterThanOrEqual(41);
    expect(searched.output).toContain(`1. docs/guides/file-077.md lines ${top.start_line}-${top.end_line}`);
    expect(searched.output).toContain('The retry budget for the payment gateway is seven attempts.');
    // Hidden and dependency folders stayed out of the index.
    expect(searched.output).not.toContain('stale copy');
    expect(searched.output).not.toContain('vendored copy');

    const edit = await callTool(stack, tenant.apiKey, sessionId, 'edit_file', { path: 'docs/guides/file-077.md', old_string: 'seven attempts', new_string: 'eleven attempts' });
    expect(edit.is_error).toBe(false);
    const again = await callTool(stack, tenant.apiKey, sessionId, 'rag_index', { path: 'docs' });
    expect(again.metadata).toMatchObject({ files_indexed: 1, files_unchanged: 119, removed: 0 });
    const after = await callTool(stack, tenant.apiKey, sessionId, 'rag_search', { query: 'retry budget of the payment gateway' });
    expect(after.output).toContain('The retry budget for the payment gateway is eleven attempts.');
    expect(after.output).not.toContain('seven attempts');
    expect(after.metadata.results[0]).toMatchObject({ path: 'docs/guides/file-077.md' });
  });

  it('drops files that disappeared, and indexes a single file', async () => {
    const removed = await callTool(stack, tenant.apiKey, sessionId, 'terminal', { command: 'rm docs/api/file-031.md' });
    expect(removed.metadata.exit_code).toBe(0);
    const reindexed = await callTool(stack, tenant.apiKey, sessionId, 'rag_index', { path: 'docs/api' });
    expect(reindexed.metadata).toMatchObject({ files_indexed: 0, files_unchanged: 39, removed: 1 });
    const gone = await callTool(stack, tenant.apiKey, sessionId, 'rag_search', { query: 'computeShippingCost' });
    expect(gone.metadata.results.map((r: any) => r.path)).not.toContain('docs/api/file-031.md');

    const single = await callTool(stack, tenant.apiKey, sessionId, 'rag_index', { path: '/workspace/notes/cars.md' });
    expect(single.metadata).toMatchObject({ kind: 'file', path: 'notes/cars.md', files_indexed: 1, chunks: 1 });
    const car = await callTool(stack, tenant.apiKey, sessionId, 'rag_search', { query: 'tyres' });
    expect(car.metadata.results[0]).toMatchObject({ path: 'notes/cars.md', start_line: 1, end_line: 1 });
    // Full text alone knows no synonyms: without embeddings "vehicle" finds nothing.
    const synonym = await callTool(stack, tenant.apiKey, sessionId, 'rag_search', { query: 'vehicle' });
    expect(synonym.metadata.count).toBe(0);
    expect(synonym.output).toMatch(/^Nothing in the \d+ indexed files matches "vehicle"\.$/);
  });

  it('splits identifiers, and finds Chinese text by substring', async () => {
    const session = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
    await callTool(stack, tenant.apiKey, session, 'write_file', { path: 'src/shipping.ts', content: 'export function computeShippingCost(order: Order) {\n  return order.weight * RATE;\n}\n' });
    await callTool(stack, tenant.apiKey, session, 'write_file', { path: 'src/zh.md', content: '标题\n\n支付网关的重试预算是七次。\n' });
    expect((await callTool(stack, tenant.apiKey, session, 'rag_index', { path: 'src' })).metadata.files_indexed).toBe(2);
    const identifier = await callTool(stack, tenant.apiKey, session, 'rag_search', { query: 'shipping cost' });
    expect(identifier.metadata.results[0]).toMatchObject({ path: 'src/shipping.ts', start_line: 1, end_line: 3, match: 'text' });
    const chinese = await callTool(stack, tenant.apiKey, session, 'rag_search', { query: '重试预算' });
    expect(chinese.metadata.results[0]).toMatchObject({ path: 'src/zh.md', match: 'fuzzy' });
    // The whole workspace: the same two files, already indexed and unchanged.
    const everything = await callTool(stack, tenant.apiKey, session, 'rag_index', { path: '.' });
    expect(everything.metadata).toMatchObject({ path: '.', kind: 'directory', files_indexed: 0, files_unchanged: 2, removed: 0 });
    expect(everything.output).toMatch(/^Indexed the workspace: 2 files read/);
  });

  it('lets two indexers of one folder run at once without duplicating anything', async () => {
    const made = await callTool(stack, tenant.apiKey, sessionId, 'terminal', {
      command: 'mkdir -p pair && for i in $(seq 1 60); do printf "pair file %s mentions quokka\\n" $i > pair/f$i.txt; done',
    });
    expect(made.metadata.exit_code).toBe(0);
    const [a, b] = await Promise.all([
      callTool(stack, tenant.apiKey, sessionId, 'rag_index', { path: 'pair' }),
      callTool(stack, tenant.apiKey, sessionId, 'rag_index', { path: 'pair' }),
    ]);
    expect([a.is_error, b.is_error]).toEqual([false, false]);
    expect(a.metadata.files_seen + b.metadata.files_seen).toBe(120);
    const found = await callTool(stack, tenant.apiKey, sessionId, 'rag_search', { query: 'quokka', limit: 20 });
    const paths = found.metadata.results.map((r: any) => r.path);
    expect(paths).toHaveLength(20);
    expect(new Set(paths).size).toBe(20);
    const again = await callTool(stack, tenant.apiKey, sessionId, 'rag_index', { path: 'pair' });
    expect(again.metadata).toMatchObject({ files_indexed: 0, files_unchanged: 60, removed: 0 });
  });

  it('keeps each session its own index, and explains what it cannot index', async () => {
    const fresh = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
    const empty = await callTool(stack, tenant.apiKey, fresh, 'rag_search', { query: 'retry budget' });
    expect(empty.output).toBe('Nothing is indexed in this session yet: index files or folders with rag_index first.');

    const missing = await callTool(stack, tenant.apiKey, fresh, 'rag_index', { path: 'nope' });
    expect(missing.is_error).toBe(true);
    expect(missing.output).toMatch(/^Cannot index nope: not found/);
    const outside = await callTool(stack, tenant.apiKey, fresh, 'rag_index', { path: '../../etc' });
    expect(outside.is_error).toBe(true);
    expect(outside.output).toContain('outside the workspace');

    // Another tenant cannot reach the session at all.
    const other = await stack.createTenant();
    const denied = await stack.request('POST', `/v1/sessions/${sessionId}/tools/rag_search`, { key: other.apiKey, body: { arguments: { query: 'retry' } } });
    expect(denied.status).toBe(404);
  });

  it('is offered only by the `all` toolset or when enabled', async () => {
    const { results } = await runToolCalls(stack, model, tenant.apiKey, [{ name: 'rag_index', arguments: { path: 'docs' } }], { session_id: sessionId });
    expect(results[0].is_error).toBe(true);
    expect(results[0].output).toContain('tool rag_index is not available in this run');
  });
});
