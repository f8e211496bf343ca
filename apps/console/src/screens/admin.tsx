import { FormEvent, useState } from 'react';
import { request, seg } from '../api';
import { Age, ErrorNote, Section } from '../components';
import { useAction, useLoad } from '../hooks';
import type { ApiKey, Page, Tenant } from '../types';

/** Deployment administration with the admin token: tenants and their API keys. */
export function AdminPage({ adminToken }: { adminToken: string }) {
  const tenants = useLoad((signal) => request<Page<Tenant>>(adminToken, '/v1/admin/tenants', { signal }), 'tenants');
  const [name, setName] = useState('');
  const [selected, setSelected] = useState<string | null>(null);
  const create = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void create.run(async () => {
      const tenant = await request<Tenant>(adminToken, '/v1/admin/tenants', { method: 'POST', body: { name: name.trim() } });
      setName('');
      setSelected(tenant.id);
      tenants.reload();
    });
  };
  return (
    <>
      <Section title="Tenants">
        <ErrorNote error={tenants.error} />
        <form className="inline" onSubmit={submit}>
          <label htmlFor="tenant-name">New tenant name</label>
          <input id="tenant-name" value={name} maxLength={100} onChange={(e) => setName(e.target.value)} />
          <button type="submit" className="primary" disabled={create.busy || !name.trim()}>Create tenant</button>
        </form>
        <ErrorNote error={create.error} />
        <div className="table-wrap">
          <table>
            <caption className="sr-only">Tenants, newest first</caption>
            <thead><tr><th scope="col">Tenant</th><th scope="col">Id</th><th scope="col">Limits</th><th scope="col">Created</th></tr></thead>
            <tbody>
              {tenants.data?.data.map((t) => (
                <tr key={t.id} aria-selected={selected === t.id}>
                  <td><button type="button" className="link" onClick={() => setSelected(t.id)}>{t.name}</button></td>
                  <td><code>{t.id}</code></td>
                  <td>{Object.entries(t.limits).map(([k, v]) => `${k.replace(/_/g, ' ')}: ${v}`).join(', ') || 'none'}</td>
                  <td><Age at={t.created_at} /></td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </Section>
      {selected && <TenantKeys adminToken={adminToken} tenantId={selected} />}
    </>
  );
}

function TenantKeys({ adminToken, tenantId }: { adminToken: string; tenantId: string }) {
  const keys = useLoad((signal) => request<Page<ApiKey>>(adminToken, `/v1/admin/tenants/${seg(tenantId)}/api_keys`, { signal }), tenantId);
  const [name, setName] = useState('');
  const [issued, setIssued] = useState<string | null>(null);
  const action = useAction();
  const issue = (e: FormEvent) => {
    e.preventDefault();
    void action.run(async () => {
      const key = await request<{ key: string }>(adminToken, `/v1/admin/tenants/${seg(tenantId)}/api_keys`, { method: 'POST', body: name.trim() ? { name: name.trim() } : {} });
      setIssued(key.key);
      setName('');
      keys.reload();
    });
  };
  return (
    <Section title={`API keys of ${tenantId}`}>
      <ErrorNote error={keys.error ?? action.error} />
      <form className="inline" onSubmit={issue}>
        <label htmlFor="key-name">Key name (optional)</label>
        <input id="key-name" value={name} maxLength={100} onChange={(e) => setName(e.target.value)} />
        <button type="submit" className="primary" disabled={action.busy}>Issue a key</button>
      </form>
      {issued && (
        <div className="notice" role="status">
          <p>The new key, shown this once: copy it now.</p>
          <code className="secret" data-testid="issued-key">{issued}</code>
        </div>
      )}
      <div className="table-wrap">
        <table>
          <caption className="sr-only">API keys (prefixes only)</caption>
          <thead><tr><th scope="col">Name</th><th scope="col">Prefix</th><th scope="col">Created</th><th scope="col">State</th><th scope="col"><span className="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {keys.data?.data.map((k) => (
              <tr key={k.id}>
                <td>{k.name ?? '—'}</td>
                <td><code>{k.prefix}</code></td>
                <td><Age at={k.created_at} /></td>
                <td>{k.revoked_at ? 'revoked' : 'active'}</td>
                <td>
                  {!k.revoked_at && (
                    <button type="button" className="danger" disabled={action.busy} aria-label={`Revoke key ${k.prefix}`} onClick={() => void action.run(async () => {
                      await request(adminToken, `/v1/admin/api_keys/${seg(k.id)}`, { method: 'DELETE' });
                      keys.reload();
                    })}>Revoke</button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </Section>
  );
}
