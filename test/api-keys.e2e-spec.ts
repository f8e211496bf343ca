import { INestApplication } from '@nestjs/common';
import { queryDatabase } from '@app/testing';
import { createHash } from 'node:crypto';
import { AddressInfo } from 'node:net';
import { createGateway } from '../apps/gateway/src/bootstrap';
import { TestStack } from './support/test-stack';

/** Keys: a visible prefix, only a hash stored, and revocation that takes effect at once. */
describe('api keys', () => {
  let stack: TestStack;
  let replica: INestApplication;
  let replicaUrl = '';

  beforeAll(async () => {
    stack = await new TestStack({ executor: false }).start();
    // A second gateway replica on the same database, with its own key cache.
    replica = await createGateway(stack.config);
    await replica.listen(0, '127.0.0.1');
    replicaUrl = `http://127.0.0.1:${(replica.getHttpServer().address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await replica?.close();
    await stack?.stop();
  });

  const admin = () => ({ key: stack.adminToken });
  const onReplica = async (key: string) => {
    const res = await fetch(`${replicaUrl}/v1/tools`, { headers: { authorization: `Bearer ${key}` } });
    return { status: res.status, text: await res.text() };
  };

  it('shows a non-secret prefix and stores only the prefix and a SHA-256 of the key', async () => {
    const { tenantId } = await stack.createTenant();
    const issued = await stack.request('POST', `/v1/admin/tenants/${tenantId}/api_keys`, { ...admin(), body: { name: 'ci' } });
    expect(issued.status).toBe(201);
    const { id, key, prefix } = issued.body;
    expect(key).toMatch(/^rbx_[0-9a-z]{10}_[0-9A-Za-z_-]{43}$/);
    expect(key.startsWith(prefix)).toBe(true);
    expect(prefix).toHaveLength(14);

    const [row] = await queryDatabase<Record<string, unknown>>(stack.db.url, 'SELECT * FROM api_keys WHERE id = $1', [id]);
    expect(row.prefix).toBe(prefix);
    expect(row.key_hash).toBe(createHash('sha256').update(key).digest('hex'));
    const secret = key.slice(prefix.length + 1);
    expect(JSON.stringify(row)).not.toContain(secret);

    const listed = await stack.request('GET', `/v1/admin/tenants/${tenantId}/api_keys`, admin());
    expect(listed.status).toBe(200);
    expect(listed.body.data).toEqual(expect.arrayContaining([expect.objectContaining({ id, name: 'ci', prefix, revoked_at: null })]));
    expect(listed.text).not.toContain(secret);
  });

  it('revokes at once on the replica that revoked, and within seconds on every other', async () => {
    const { tenantId, apiKey } = await stack.createTenant();
    const unknown = await onReplica('rbx_aaaaaaaaaa_' + 'a'.repeat(43));
    const issued = await stack.request('POST', `/v1/admin/tenants/${tenantId}/api_keys`, { ...admin(), body: {} });
    // Both replicas have the key cached as valid.
    expect((await stack.request('GET', '/v1/tools', { key: issued.body.key })).status).toBe(200);
    expect((await onReplica(issued.body.key)).status).toBe(200);

    expect((await stack.request('DELETE', `/v1/admin/api_keys/${issued.body.id}`, admin())).status).toBe(204);
    const revoked = await stack.request('GET', '/v1/tools', { key: issued.body.key });
    expect(revoked.status).toBe(401);
    expect(revoked.text).toBe(unknown.text);

    // The other replica's cache lets the key through for at most its lifetime (3 s).
    const started = Date.now();
    let seen = await onReplica(issued.body.key);
    while (seen.status !== 401 && Date.now() - started < 15_000) {
      await new Promise((r) => setTimeout(r, 100));
      seen = await onReplica(issued.body.key);
    }
    expect(seen).toEqual(unknown);
    console.log(`revoked key refused by the other replica after ${Date.now() - started} ms`);

    // The tenant's other key is unaffected; revoking twice is fine; an unknown key id is 404.
    expect((await onReplica(apiKey)).status).toBe(200);
    expect((await stack.request('DELETE', `/v1/admin/api_keys/${issued.body.id}`, admin())).status).toBe(204);
    expect((await stack.request('DELETE', '/v1/admin/api_keys/key_0000000000000000000000', admin())).status).toBe(404);
    const listed = await stack.request('GET', `/v1/admin/tenants/${tenantId}/api_keys`, admin());
    expect(listed.body.data.find((k: { id: string }) => k.id === issued.body.id).revoked_at).toEqual(expect.any(String));
  });

  it('answers unknown, revoked and malformed keys of any tenant with the same 401', async () => {
    const t = await stack.createTenant();
    const issued = await stack.request('POST', `/v1/admin/tenants/${t.tenantId}/api_keys`, { ...admin(), body: {} });
    await stack.request('DELETE', `/v1/admin/api_keys/${issued.body.id}`, admin());
    const flipped = t.apiKey.slice(0, -1) + (t.apiKey.endsWith('a') ? 'b' : 'a');
    const answers = await Promise.all(
      [issued.body.key, flipped, t.apiKey.slice(0, 14), `${t.apiKey}x`, 'rbx_aaaaaaaaaa_' + 'a'.repeat(43), stack.adminToken].map((key) =>
        stack.request('GET', '/v1/sessions/ses_0000000000000000000000', { key }),
      ),
    );
    expect(answers.map((r) => r.status)).toEqual(Array(answers.length).fill(401));
    expect(new Set(answers.map((r) => r.text)).size).toBe(1);
  });
});
