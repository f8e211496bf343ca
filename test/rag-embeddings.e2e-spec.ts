import { ScriptedModelServer } from '@app/testing';
import { callTool } from './support/tool-runs';
import { TenantCredentials, TestStack } from './support/test-stack';

/** Concepts the scripted embeddings model knows: words of one concept get the same direction. */
const CONCEPTS = [
  ['car', 'cars', 'automobile', 'vehicle', 'tyres', 'engine'],
  ['fruit', 'banana', 'bananas', 'apple', 'ripe', 'yellow'],
  ['invoice', 'payment', 'billing', 'euros'],
];

/** A vector with one dimension per concept, counting the text's words of each. */
function conceptVector(text: string): number[] {
  const words = text.toLowerCase().match(/[a-z]+/g) ?? [];
  return [...CONCEPTS.map((c) => words.filter((w) => c.includes(w)).length), 0.01];
}

/**
 * With an embeddings provider configured, rag_index stores a vector per chunk and
 * rag_search merges vector similarity with full text, so a passage is found by meaning.
 */
describe('retrieval with embeddings', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let tenant: TenantCredentials;
  let sessionId: string;

  beforeAll(async () => {
    model.embed = conceptVector;
    const modelUrl = await model.start();
    stack = await new TestStack({
      env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1', RUNBOX_EMBEDDINGS_MODEL: 'scripted-embed-1' },
    }).start();
    tenant = await stack.createTenant();
    sessionId = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
    const files: Record<string, string> = {
      'notes/cars.md': '# Cars\nThe automobile needs new tyres before winter.\n',
      'notes/fruit.md': '# Fruit\nBananas turn yellow when ripe.\n',
      'notes/billing.md': '# Billing\nInvoices are issued in euros.\n',
    };
    for (const [path, content] of Object.entries(files)) await callTool(stack, tenant.apiKey, sessionId, 'write_file', { path, content });
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
  });

  it('finds a passage by meaning that shares no word with the query', async () => {
    const indexed = await callTool(stack, tenant.apiKey, sessionId, 'rag_index', { path: 'notes' });
    expect(indexed.metadata).toMatchObject({ files_indexed: 3, chunks: 3 });
    // Each chunk was embedded once, with its path and lines in front of the text.
    const embedded = model.embeddingInputs.flat();
    expect(embedded).toHaveLength(3);
    expect(embedded).toContain('notes/cars.md lines 1-2\n# Cars\nThe automobile needs new tyres before winter.');

    const found = await callTool(stack, tenant.apiKey, sessionId, 'rag_search', { query: 'vehicle maintenance' });
    expect(found.metadata.embeddings).toBe(true);
    expect(found.metadata.results[0]).toMatchObject({ path: 'notes/cars.md' });
    expect(found.output).toContain('The automobile needs new tyres before winter.');
    // The query was embedded too.
    expect(model.embeddingInputs.flat()).toContain('vehicle maintenance');
  });

  it('still ranks exact words first when both rankings agree', async () => {
    const found = await callTool(stack, tenant.apiKey, sessionId, 'rag_search', { query: 'bananas yellow', limit: 3 });
    expect(found.metadata.results[0]).toMatchObject({ path: 'notes/fruit.md' });
  });

  it('falls back to full text when the embeddings provider fails, and says so', async () => {
    const embed = model.embed;
    model.embed = undefined; // the scripted server now answers 404 on /embeddings
    try {
      const found = await callTool(stack, tenant.apiKey, sessionId, 'rag_search', { query: 'bananas' });
      expect(found.is_error).toBe(false);
      expect(found.metadata).toMatchObject({ embeddings: false, results: [{ path: 'notes/fruit.md', match: 'text' }] });
      expect(found.output).toMatch(/Ranked by full text only: embeddings \(scripted-embed-1\): .*HTTP 404/);

      await callTool(stack, tenant.apiKey, sessionId, 'write_file', { path: 'notes/new.md', content: 'A new note.\n' });
      const indexed = await callTool(stack, tenant.apiKey, sessionId, 'rag_index', { path: 'notes' });
      expect(indexed.is_error).toBe(true);
      expect(indexed.output).toContain('Cannot index notes: embeddings (scripted-embed-1)');
    } finally {
      model.embed = embed;
    }
  });
});
