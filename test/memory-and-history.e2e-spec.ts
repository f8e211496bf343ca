import { ScriptedModelServer } from '@app/testing';
import { callTool, runToolCalls } from './support/tool-runs';
import { TenantCredentials, TestStack } from './support/test-stack';

/**
 * memory, session_search, todo and skill end to end: a scripted model calls the tools in
 * real runs; the state they keep is checked through the tools and the HTTP API.
 */
describe('memory, history search and the working tools', () => {
  const model = new ScriptedModelServer();
  let stack: TestStack;
  let acme: TenantCredentials;
  let globex: TenantCredentials;

  beforeAll(async () => {
    const modelUrl = await model.start();
    stack = await new TestStack({ env: { RUNBOX_MODEL_BASE_URL: modelUrl, RUNBOX_MODEL: 'scripted-1' } }).start();
    [acme, globex] = await Promise.all([stack.createTenant(), stack.createTenant()]);
  });

  afterAll(async () => {
    await stack?.stop();
    await model.stop();
  });

  const session = async (key: string): Promise<string> => (await stack.request('POST', '/v1/sessions', { key, body: {} })).body.id;

  describe('memory', () => {
    it("finds a fact saved in one session from another session of the tenant, never from another tenant's", async () => {
      const saved = await runToolCalls(stack, model, acme.apiKey, [
        { name: 'memory', arguments: { action: 'save', content: 'The staging database listens on port 6543.' } },
      ]);
      expect(saved.results[0]).toMatchObject({ is_error: false, metadata: { created: true, scope: null } });
      const id = saved.results[0].metadata.id as string;
      expect(id).toMatch(/^mem_/);

      const found = await runToolCalls(stack, model, acme.apiKey, [{ name: 'memory', arguments: { action: 'search', query: 'which port does the staging database use' } }]);
      expect(found.sessionId).not.toBe(saved.sessionId);
      expect(found.results[0].output).toContain('The staging database listens on port 6543.');
      expect(found.results[0].metadata.results[0]).toMatchObject({ id, match: 'text' });

      const other = await runToolCalls(stack, model, globex.apiKey, [
        { name: 'memory', arguments: { action: 'search', query: 'staging database port' } },
        { name: 'memory', arguments: { action: 'list' } },
        { name: 'memory', arguments: { action: 'delete', id } },
      ]);
      expect(other.results[0].output).toBe('No memories match "staging database port".');
      expect(other.results[1].output).toBe('No memories are stored yet.');
      expect(other.results[2].is_error).toBe(true);

      // Over HTTP: the owner sees it, the other tenant gets 404s and empty lists.
      const listed = await stack.request('GET', '/v1/memory?query=staging', { key: acme.apiKey });
      expect(listed.body.data.map((m: any) => m.id)).toEqual([id]);
      expect((await stack.request('GET', '/v1/memory?query=staging', { key: globex.apiKey })).body.data).toEqual([]);
      expect((await stack.request('GET', `/v1/memory/${id}`, { key: globex.apiKey })).status).toBe(404);
      expect((await stack.request('DELETE', `/v1/memory/${id}`, { key: globex.apiKey })).status).toBe(404);
      expect((await stack.request('GET', `/v1/memory/${id}`, { key: acme.apiKey })).body).toMatchObject({ id, content: 'The staging database listens on port 6543.' });

      // Deleting through the tool removes it for good.
      const deleted = await runToolCalls(stack, model, acme.apiKey, [{ name: 'memory', arguments: { action: 'delete', id } }]);
      expect(deleted.results[0]).toMatchObject({ is_error: false, output: `Deleted memory ${id}.` });
      expect((await stack.request('GET', `/v1/memory/${id}`, { key: acme.apiKey })).status).toBe(404);
    });

    it("keeps a run's memory_scope to itself while shared facts reach every scope", async () => {
      const shared = await stack.request('POST', '/v1/memory', { key: acme.apiKey, body: { content: 'Invoices are issued in euros.' } });
      expect(shared.status).toBe(201);
      const alice = await runToolCalls(
        stack,
        model,
        acme.apiKey,
        [
          { name: 'memory', arguments: { action: 'save', content: 'Alice prefers metric units in invoices.' } },
          { name: 'memory', arguments: { action: 'search', query: 'invoices' } },
        ],
        { memory_scope: 'user:alice' },
      );
      expect(alice.results[0].metadata).toMatchObject({ scope: 'user:alice', created: true });
      expect(alice.results[1].metadata.count).toBe(2);

      const bob = await runToolCalls(stack, model, acme.apiKey, [{ name: 'memory', arguments: { action: 'search', query: 'invoices metric units' } }], {
        memory_scope: 'user:bob',
      });
      expect(bob.results[0].output).toContain('Invoices are issued in euros.');
      expect(bob.results[0].output).not.toContain('Alice');

      const unscoped = await runToolCalls(stack, model, acme.apiKey, [{ name: 'memory', arguments: { action: 'list' } }]);
      expect(unscoped.results[0].output).not.toContain('Alice');

      const bobView = await stack.request('GET', '/v1/memory?scope=user:bob', { key: acme.apiKey });
      expect(bobView.body.data.map((m: any) => m.content)).toEqual(['Invoices are issued in euros.']);
      const everything = await stack.request('GET', '/v1/memory', { key: acme.apiKey });
      expect(everything.body.data.map((m: any) => m.scope)).toEqual(expect.arrayContaining(['user:alice', null]));

      const bad = await stack.request('POST', '/v1/runs', { key: acme.apiKey, body: { input: 'x', memory_scope: 'has spaces' } });
      expect(bad.status).toBe(400);
      expect(bad.body.error.message).toContain('body.memory_scope');
    });

    it('ranks whole matches first and falls back to substrings and trigrams', async () => {
      const save = (content: string) => stack.request('POST', '/v1/memory', { key: globex.apiKey, body: { content } });
      await save('Deploys happen on Fridays.');
      const both = (await save('The deploy pipeline needs two approvals.')).body.id;
      const chinese = (await save('数据库密码保存在保险箱里。')).body.id;
      const postgres = (await save('Reports are built from the postgres replica.')).body.id;

      const ranked = await stack.request('GET', `/v1/memory?query=${encodeURIComponent('deploy approvals')}`, { key: globex.apiKey });
      expect(ranked.body.data[0]).toMatchObject({ id: both, match: 'text' });
      expect(ranked.body.data).toHaveLength(2);

      const cjk = await stack.request('GET', `/v1/memory?query=${encodeURIComponent('密码')}`, { key: globex.apiKey });
      expect(cjk.body.data.map((m: any) => m.id)).toEqual([chinese]);
      expect(cjk.body.data[0].match).toBe('fuzzy');

      const typo = await stack.request('GET', '/v1/memory?query=postgress', { key: globex.apiKey });
      expect(typo.body.data[0]).toMatchObject({ id: postgres, match: 'fuzzy' });
    });

    it('answers bad input with 400s naming the field, and keeps one copy of a repeated fact', async () => {
      const key = acme.apiKey;
      const expect400 = async (res: Promise<any>, field: string) => {
        const r = await res;
        expect(r.status).toBe(400);
        expect(r.body.error.message).toContain(field);
      };
      await expect400(stack.request('POST', '/v1/memory', { key, body: {} }), 'body.content');
      await expect400(stack.request('POST', '/v1/memory', { key, body: { content: '   ' } }), 'body.content');
      await expect400(stack.request('POST', '/v1/memory', { key, body: { content: 'x'.repeat(4001) } }), 'body.content');
      await expect400(stack.request('POST', '/v1/memory', { key, body: { content: 'x', scope: 'a b' } }), 'body.scope');
      await expect400(stack.request('POST', '/v1/memory', { key, body: { content: 'x', extra: 1 } }), 'body');
      await expect400(stack.request('GET', '/v1/memory?limit=0', { key }), 'query.limit');
      await expect400(stack.request('GET', '/v1/memory?limit=abc', { key }), 'query.limit');
      await expect400(stack.request('GET', '/v1/memory?color=red', { key }), 'query');
      expect((await stack.request('DELETE', '/v1/memory/not-an-id', { key })).status).toBe(404);
      expect((await stack.request('GET', '/v1/memory', {})).status).toBe(401);

      const first = await stack.request('POST', '/v1/memory', { key, body: { content: 'Builds run on Node 20.' } });
      const again = await stack.request('POST', '/v1/memory', { key, body: { content: '  Builds run on Node 20.  ' } });
      expect([first.status, again.status]).toEqual([201, 200]);
      expect(again.body).toMatchObject({ id: first.body.id, created: false });

      // A tool call with bad arguments is refused with the field named, and the run goes on.
      const run = await runToolCalls(stack, model, key, [{ name: 'memory', arguments: { action: 'save' } }]);
      expect(run.results[0].is_error).toBe(true);
      expect(run.results[0].output).toContain('arguments.content');
    });
  });

  describe('session_search', () => {
    it("finds a phrase from an older session, with its session, run, role and a snippet, and only in the tenant's own history", async () => {
      model.enqueue({ content: 'Noted: Bluebird Falcon it is.' });
      const older = await stack.request('POST', '/v1/runs', { key: acme.apiKey, body: { input: 'Our launch codename is Bluebird Falcon, keep it quiet.' } });
      await stack.waitForRun(acme.apiKey, older.body.id);

      const search = await runToolCalls(stack, model, acme.apiKey, [{ name: 'session_search', arguments: { query: 'launch codename bluebird' } }], {
        input: 'What was the launch codename again? Use session_search for launch codename bluebird.',
      });
      const [result] = search.results;
      expect(result.is_error).toBe(false);
      expect(result.metadata.results[0]).toMatchObject({ session_id: older.body.session_id, run_id: older.body.id, role: 'user' });
      expect(result.metadata.results[0].created_at).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(result.output).toContain(`session ${older.body.session_id}`);
      expect(result.output).toMatch(/\*\*codename\*\* is \*\*Bluebird\*\*/);
      // The searching run's own question is not a result.
      expect(result.metadata.results.map((r: any) => r.run_id)).not.toContain(search.run.id);

      const other = await callTool(stack, globex.apiKey, await session(globex.apiKey), 'session_search', { query: 'Bluebird Falcon' });
      expect(other.output).toBe('No past messages match "Bluebird Falcon".');
    });

    it('finds Chinese text by substring, and forgets deleted sessions', async () => {
      model.enqueue({ content: '好的' });
      const run = await stack.request('POST', '/v1/runs', { key: globex.apiKey, body: { input: '部署窗口是每周五下午' } });
      await stack.waitForRun(globex.apiKey, run.body.id);
      const searcher = await session(globex.apiKey);
      const found = await callTool(stack, globex.apiKey, searcher, 'session_search', { query: '周五' });
      expect(found.metadata.results[0]).toMatchObject({ session_id: run.body.session_id, role: 'user' });
      expect(found.output).toContain('**周五**');

      expect((await stack.request('DELETE', `/v1/sessions/${run.body.session_id}`, { key: globex.apiKey })).status).toBe(204);
      const gone = await callTool(stack, globex.apiKey, searcher, 'session_search', { query: '周五' });
      expect(gone.metadata.count).toBe(0);
    });
  });

  describe('todo', () => {
    it('keeps a task list through a run and shows it at GET /v1/sessions/{id}/todos', async () => {
      const { sessionId, results } = await runToolCalls(stack, model, acme.apiKey, [
        { name: 'todo', arguments: { action: 'add', items: ['write the parser', { content: 'ship it', status: 'in_progress' }] } },
        { name: 'todo', arguments: { action: 'update', id: '1', status: 'completed' } },
        { name: 'todo', arguments: { action: 'remove', id: 2 } },
        { name: 'todo', arguments: { action: 'add', items: ['update the docs'] } },
        { name: 'todo', arguments: { action: 'update', id: 9, status: 'completed' } },
        { name: 'todo', arguments: { action: 'update', id: 3 } },
        { name: 'todo', arguments: { action: 'list' } },
      ]);
      expect(results[0].output).toContain('[~] 2. ship it (in progress)');
      expect(results[1].output).toContain('[x] 1. write the parser');
      expect(results[4]).toMatchObject({ is_error: true });
      expect(results[4].output).toContain('no task 9');
      expect(results[5].is_error).toBe(true);
      expect(results[5].output).toContain('arguments.status');
      expect(results[6].output).toBe('Todo list: 1 of 2 completed.\n[x] 1. write the parser\n[ ] 3. update the docs');

      const listed = await stack.request('GET', `/v1/sessions/${sessionId}/todos`, { key: acme.apiKey });
      expect(listed.status).toBe(200);
      expect(listed.body.data.map((t: any) => ({ id: t.id, content: t.content, status: t.status }))).toEqual([
        { id: 1, content: 'write the parser', status: 'completed' },
        { id: 3, content: 'update the docs', status: 'pending' },
      ]);

      expect((await stack.request('GET', `/v1/sessions/${sessionId}/todos`, { key: globex.apiKey })).status).toBe(404);
      expect((await stack.request('GET', '/v1/sessions/ses_missing000000000000/todos', { key: acme.apiKey })).status).toBe(404);
      const elsewhere = await stack.request('GET', `/v1/sessions/${await session(acme.apiKey)}/todos`, { key: acme.apiKey });
      expect(elsewhere.body.data).toEqual([]);
    });
  });

  describe('skill', () => {
    it('reads back a skill written in another session, lists it beside the built-ins, and protects the built-ins', async () => {
      const content = '# Release checklist\nUse when shipping a release.\n\n1. Run the tests.\n2. Tag the commit.\n';
      const written = await runToolCalls(stack, model, acme.apiKey, [
        { name: 'skill', arguments: { action: 'write', name: 'release-checklist', content } },
        { name: 'skill', arguments: { action: 'write', name: 'writing-skills', content: '# mine' } },
        { name: 'skill', arguments: { action: 'write', name: 'Bad Name', content: '# x' } },
      ]);
      expect(written.results[0]).toMatchObject({ is_error: false, output: 'Created skill release-checklist.' });
      expect(written.results[1].is_error).toBe(true);
      expect(written.results[1].output).toContain('built-in');
      expect(written.results[2].is_error).toBe(true);
      expect(written.results[2].output).toContain('arguments.name');

      const read = await runToolCalls(stack, model, acme.apiKey, [
        { name: 'skill', arguments: { action: 'read', name: 'release-checklist' } },
        { name: 'skill', arguments: { action: 'list' } },
        { name: 'skill', arguments: { action: 'read', name: 'background-jobs' } },
      ]);
      expect(read.results[0].output).toBe(content.trim());
      expect(read.results[1].output).toContain('- release-checklist: Use when shipping a release.');
      expect(read.results[1].output).toContain('- writing-skills (built-in):');
      expect(read.results[2].output).toContain('kill -- -<pid>');

      const replaced = await callTool(stack, acme.apiKey, read.sessionId, 'skill', { action: 'write', name: 'release-checklist', content: '# v2\nUse for v2.' });
      expect(replaced.output).toBe('Replaced skill release-checklist.');

      const other = await callTool(stack, globex.apiKey, await session(globex.apiKey), 'skill', { action: 'read', name: 'release-checklist' });
      expect(other.is_error).toBe(true);
    });
  });

  it('lists the tools in the catalogue with their toolsets', async () => {
    const toolsets = (await stack.request('GET', '/v1/toolsets', { key: acme.apiKey })).body.data as Array<{ name: string; tools: string[] }>;
    const members = Object.fromEntries(toolsets.map((t) => [t.name, t.tools]));
    expect(members.research).toEqual(expect.arrayContaining(['memory', 'session_search', 'rag_search', 'todo', 'skill']));
    expect(members.minimal).toContain('todo');
    expect(members.coding).toEqual(expect.arrayContaining(['todo', 'skill']));
    expect(members.browser).toContain('todo');
    for (const name of ['minimal', 'coding', 'research', 'browser', 'default']) expect(members[name]).not.toContain('rag_index');
    expect(members.all).toContain('rag_index');

    const tools = (await stack.request('GET', '/v1/tools', { key: acme.apiKey })).body.data as any[];
    const memory = tools.find((t) => t.name === 'memory');
    expect(memory).toMatchObject({ mutating: true, toolsets: ['research', 'default', 'all'] });
    expect(memory.parameters.properties.action.enum).toEqual(['save', 'search', 'list', 'delete']);
    expect(tools.find((t) => t.name === 'session_search').mutating).toBe(false);
  });
});
