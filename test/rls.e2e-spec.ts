import { PrismaService } from '@app/persistence';
import { queryDatabase, TEST_ROLES } from '@app/testing';
import { Client } from 'pg';
import { TenantCredentials, TestStack } from './support/test-stack';

/** Tables that hold no tenant data. Anything else must be under forced row-level security. */
const DEPLOYMENT_TABLES = new Set(['_prisma_migrations']);
/**
 * Tables the security-definer search functions read: their owner (the schema owner, which
 * could switch row-level security off anyway) may read every row, so the indexes answer;
 * the functions filter by the tenant themselves (test/search-functions.e2e-spec.ts).
 */
const SEARCHED_TABLES = new Set(['memories', 'messages', 'rag_chunks', 'sessions']);

interface TableSecurity {
  table: string;
  rls: boolean;
  forced: boolean;
  tenant_column: string | null;
}

interface PolicyRow {
  table: string;
  policy: string;
  roles: string[];
  permissive: string;
  cmd: string;
  qual: string | null;
  with_check: string | null;
}

/**
 * Isolation that does not depend on the application code: Postgres itself refuses the
 * services' role another tenant's rows. The meta-test fails for any table that a migration
 * adds without forced row-level security and a tenant policy.
 */
describe('row-level security', () => {
  let stack: TestStack;
  let a: TenantCredentials;
  let b: TenantCredentials;

  beforeAll(async () => {
    stack = await new TestStack({ executor: false }).start();
    [a, b] = [await stack.createTenant('rls-a'), await stack.createTenant('rls-b')];
    // Rows in every table for both tenants: sessions, runs (they fail at once without a
    // model, leaving messages and events), keys, and a sandbox and tool call row each.
    for (const t of [a, b]) {
      const run = await stack.request('POST', '/v1/runs', { key: t.apiKey, body: { input: 'hello' } });
      await stack.waitForRun(t.apiKey, run.body.id);
      await queryDatabase(stack.db.url, `INSERT INTO sandboxes (session_id, tenant_id, executor_id, state) VALUES ($1, $2, 'nowhere', 'removed')`, [run.body.session_id, t.tenantId]);
      await queryDatabase(
        stack.db.url,
        `INSERT INTO tool_calls (id, tenant_id, run_id, session_id, call_id, name, arguments, status) VALUES ($1, $2, $3, $4, 'c1', 'terminal', '{}', 'completed')`,
        [`tc_${t.tenantId.slice(4, 20)}`, t.tenantId, run.body.id, run.body.session_id],
      );
      // The gateway-side tools' tables get rows through the API where one exists.
      const tool = (name: string, args: Record<string, unknown>) =>
        stack.request('POST', `/v1/sessions/${run.body.session_id}/tools/${name}`, { key: t.apiKey, body: { arguments: args } });
      expect((await stack.request('POST', '/v1/memory', { key: t.apiKey, body: { content: `fact of ${t.tenantId}` } })).status).toBe(201);
      const egress = { allow: [], deny: [`${t.tenantId.slice(4, 12).toLowerCase()}.example`] };
      expect((await stack.request('PATCH', `/v1/admin/tenants/${t.tenantId}`, { key: stack.adminToken, body: { egress } })).status).toBe(200);
      expect((await tool('todo', { action: 'add', items: ['one thing'] })).status).toBe(200);
      expect((await tool('skill', { action: 'write', name: 'rls-skill', content: 'how to test isolation' })).status).toBe(200);
      const doc = `doc_${t.tenantId.slice(4, 20)}`;
      await queryDatabase(
        stack.db.url,
        `INSERT INTO rag_documents (id, tenant_id, session_id, path, sha256, size_bytes, line_count, chunk_count) VALUES ($1, $2, $3, 'a.txt', 'x', 1, 1, 1)`,
        [doc, t.tenantId, run.body.session_id],
      );
      await queryDatabase(
        stack.db.url,
        `INSERT INTO rag_chunks (tenant_id, session_id, document_id, path, start_line, end_line, content, search) VALUES ($1, $2, $3, 'a.txt', 1, 1, 'x', to_tsvector('simple', 'x'))`,
        [t.tenantId, run.body.session_id, doc],
      );
      const server = `srv_${t.tenantId.slice(4, 20)}`;
      await queryDatabase(
        stack.db.url,
        `INSERT INTO servers (id, tenant_id, name, host, port, username, auth_type, credentials) VALUES ($1, $2, 'rls-box', 'example.com', 22, 'u', 'password', 'v1.0.0.0.0')`,
        [server, t.tenantId],
      );
      await queryDatabase(stack.db.url, `INSERT INTO session_ssh_backends (session_id, tenant_id, server_id) VALUES ($1, $2, $3)`, [run.body.session_id, t.tenantId, server]);
      await queryDatabase(stack.db.url, `INSERT INTO mcp_servers (id, tenant_id, name, transport, url) VALUES ($1, $2, 'rls-mcp', 'streamable_http', 'https://mcp.example.com/mcp')`, [
        `mcp_${t.tenantId.slice(4, 20)}`,
        t.tenantId,
      ]);
      await queryDatabase(stack.db.url, `INSERT INTO openapi_services (id, tenant_id, name, document) VALUES ($1, $2, 'rls-api', '{"title": "", "baseUrl": "https://api.example.com", "operations": []}')`, [
        `oas_${t.tenantId.slice(4, 20)}`,
        t.tenantId,
      ]);
    }
  });
  afterAll(() => stack?.stop());

  async function tables(): Promise<TableSecurity[]> {
    return queryDatabase<TableSecurity & Record<string, unknown>>(
      stack.db.ownerUrl,
      `SELECT c.relname AS table, c.relrowsecurity AS rls, c.relforcerowsecurity AS forced,
              (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = c.oid AND NOT a.attisdropped
                 AND a.attname = CASE WHEN c.relname = 'tenants' THEN 'id' ELSE 'tenant_id' END) AS tenant_column
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY c.relname`,
    );
  }

  it('forces row-level security with a tenant policy on every table that holds tenant data', async () => {
    const all = (await tables()).filter((t) => !DEPLOYMENT_TABLES.has(t.table));
    const policies = await queryDatabase<PolicyRow & Record<string, unknown>>(
      stack.db.ownerUrl,
      `SELECT tablename AS table, policyname AS policy, roles::text[] AS roles, permissive, cmd, qual, with_check
         FROM pg_policies WHERE schemaname = 'public'`,
    );
    const problems: string[] = [];
    for (const t of all) {
      if (!t.tenant_column) problems.push(`${t.table}: no tenant_id column`);
      if (!t.rls || !t.forced) problems.push(`${t.table}: row-level security is not enabled and forced`);
      // A permissive policy for every role (or runbox_app) that compares the row's tenant with
      // app.tenant_id, both for reading and writing, on every command.
      const tenantPolicy = policies.find(
        (p) =>
          p.table === t.table &&
          p.permissive === 'PERMISSIVE' &&
          p.cmd === 'ALL' &&
          (p.roles.includes('public') || p.roles.includes(TEST_ROLES.app.user)) &&
          [p.qual, p.with_check].every((e) => e !== null && e.includes(`${t.tenant_column} = current_setting('app.tenant_id'`)),
      );
      if (!tenantPolicy) problems.push(`${t.table}: no policy comparing ${t.tenant_column} with app.tenant_id`);
      // Nothing but the system role may see past it, and the search functions' owner may read.
      const owner = new URL(stack.db.ownerUrl).username;
      const searchDefiner = (p: PolicyRow) =>
        SEARCHED_TABLES.has(p.table) && p.policy === 'search_definer' && p.cmd === 'SELECT' && p.roles.length === 1 && p.roles[0] === owner && p.qual === 'true';
      const wider = policies.filter(
        (p) => p.table === t.table && p !== tenantPolicy && !(p.roles.length === 1 && p.roles[0] === TEST_ROLES.system.user) && !searchDefiner(p),
      );
      for (const p of wider) problems.push(`${t.table}: policy ${p.policy} applies to ${p.roles.join(', ')}`);
    }
    expect(problems).toEqual([]);
    expect(all.map((t) => t.table)).toEqual(
      expect.arrayContaining(['api_keys', 'memories', 'messages', 'rag_chunks', 'rag_documents', 'run_events', 'runs', 'sandboxes', 'servers', 'session_ssh_backends', 'sessions', 'skills', 'tenant_egress_rules', 'tenants', 'todos', 'tool_calls']),
    );
    console.log(`tables under forced row-level security: ${all.map((t) => t.table).join(', ')}`);
  });

  it('connects the services as a role that owns nothing and cannot bypass row-level security', async () => {
    const [role] = await queryDatabase<{ superuser: boolean; bypass: boolean; owns: string; member_of_owner: boolean }>(
      stack.db.ownerUrl,
      `SELECT r.rolsuper AS superuser, r.rolbypassrls AS bypass,
              (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = 'public' AND c.relowner = r.oid)::text AS owns,
              pg_has_role(r.oid, (SELECT relowner FROM pg_class WHERE relname = 'sessions'), 'MEMBER') AS member_of_owner
         FROM pg_roles r WHERE r.rolname = $1`,
      [TEST_ROLES.app.user],
    );
    expect(role).toEqual({ superuser: false, bypass: false, owns: '0', member_of_owner: false });
    // And the services refuse to start on the owner's connection.
    await expect(PrismaService.forService({ url: stack.db.ownerUrl })).rejects.toThrow(/owns table .*row-level security would not hold/);
    const app = await PrismaService.forService({ url: stack.db.appUrl });
    await app.close();
  });

  describe('as the services role', () => {
    let client: Client;
    beforeEach(async () => {
      client = new Client({ connectionString: stack.db.appUrl });
      await client.connect();
    });
    afterEach(() => client.end());

    const asTenant = async <T>(tenantId: string | null, work: () => Promise<T>): Promise<T> => {
      await client.query('BEGIN');
      try {
        if (tenantId) await client.query(`SELECT set_config('app.tenant_id', $1, true)`, [tenantId]);
        return await work();
      } finally {
        await client.query('ROLLBACK');
      }
    };

    it('sees only its tenant’s rows in every table, and nothing without a tenant', async () => {
      const readable = (await tables()).filter((t) => !DEPLOYMENT_TABLES.has(t.table) && !['api_keys'].includes(t.table));
      for (const t of readable) {
        const none = await asTenant(null, () => client.query(`SELECT count(*)::int AS n FROM "${t.table}"`));
        expect({ table: t.table, rows: none.rows[0].n }).toEqual({ table: t.table, rows: 0 });
        const own = await asTenant(a.tenantId, () => client.query(`SELECT "${t.tenant_column}" AS tenant FROM "${t.table}"`));
        expect({ table: t.table, tenants: [...new Set(own.rows.map((r) => r.tenant))] }).toEqual({ table: t.table, tenants: [a.tenantId] });
      }
    });

    it('cannot write rows of another tenant, nor reach them by update or delete', async () => {
      await asTenant(a.tenantId, async () => {
        await expect(client.query(`INSERT INTO sessions (id, tenant_id) VALUES ('ses_forged000000000000', $1)`, [b.tenantId])).rejects.toThrow(
          /row-level security/,
        );
      });
      await asTenant(a.tenantId, async () => {
        expect((await client.query(`UPDATE sessions SET status = 'deleted' WHERE tenant_id = $1`, [b.tenantId])).rowCount).toBe(0);
        expect((await client.query(`DELETE FROM messages WHERE tenant_id = $1`, [b.tenantId])).rowCount).toBe(0);
        // Moving an own row to the other tenant is refused too.
        await expect(client.query(`UPDATE sessions SET tenant_id = $1`, [b.tenantId])).rejects.toThrow(/row-level security/);
      });
      const [bSessions] = await queryDatabase<{ n: number }>(stack.db.url, `SELECT count(*)::int AS n FROM sessions WHERE tenant_id = $1 AND status = 'active'`, [b.tenantId]);
      expect(bSessions.n).toBe(1);
    });

    it('cannot switch row-level security off, read keys, or write tenants', async () => {
      await asTenant(a.tenantId, async () => {
        await expect(client.query('ALTER TABLE sessions DISABLE ROW LEVEL SECURITY')).rejects.toThrow(/must be owner/);
      });
      await asTenant(a.tenantId, async () => {
        await client.query('SET LOCAL row_security = off');
        await expect(client.query('SELECT count(*) FROM sessions')).rejects.toThrow(/row-level security/);
      });
      await asTenant(a.tenantId, async () => {
        await expect(client.query('SELECT count(*) FROM api_keys')).rejects.toThrow(/permission denied/);
      });
      await asTenant(a.tenantId, async () => {
        await expect(client.query(`UPDATE tenants SET limits = '{}'`)).rejects.toThrow(/permission denied/);
      });
    });
  });
});
