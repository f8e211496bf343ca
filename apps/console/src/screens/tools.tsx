import { useState } from 'react';
import { ApiError, request, seg } from '../api';
import { ErrorNote, Section, StatusBadge } from '../components';
import { useAction, useLoad } from '../hooks';
import type { McpServer, Page, SavedServer, Tenant, Tool } from '../types';

/** The tool catalogue, the tenant's MCP and SSH servers, and (with the admin token) saved per-tool switches. */
export function ToolsPage({ token, adminToken }: { token: string; adminToken: string | null }) {
  const tools = useLoad((signal) => request<Page<Tool>>(token, '/v1/tools', { signal }), 'tools');
  const mcp = useLoad((signal) => request<Page<McpServer>>(token, '/v1/mcp_servers', { signal }), 'mcp', 10_000);
  const servers = useLoad((signal) => optional(request<Page<SavedServer>>(token, '/v1/servers', { signal })), 'servers');
  return (
    <>
      <Section title="Tools">
        <ErrorNote error={tools.error} />
        {tools.data && (
          <div className="table-wrap">
            <table data-testid="tools-table">
              <caption className="sr-only">Registered tools</caption>
              <thead><tr><th scope="col">Tool</th><th scope="col">Toolsets</th><th scope="col">Changes state</th><th scope="col">Available</th></tr></thead>
              <tbody>
                {tools.data.data.map((t) => (
                  <tr key={t.name}>
                    <td><code>{t.name}</code><div className="muted small">{firstSentence(t.description)}</div></td>
                    <td>{t.toolsets.join(', ')}</td>
                    <td>{t.mutating ? 'yes' : 'no'}</td>
                    <td>{t.available === false ? `no: ${t.unavailable_reason ?? ''}` : 'yes'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Section>
      {adminToken && tools.data && <SavedToolSwitches adminToken={adminToken} tools={tools.data.data} />}
      <Section title="MCP servers">
        <ErrorNote error={mcp.error} />
        {mcp.data?.data.length === 0 && <p className="muted">No MCP servers (add them with POST /v1/mcp_servers).</p>}
        <ul className="plain">
          {mcp.data?.data.map((m) => (
            <li key={m.id}><strong>{m.name}</strong> ({m.transport}) <StatusBadge status={m.status} />{m.last_error ? <span className="muted"> — {m.last_error}</span> : null}</li>
          ))}
        </ul>
      </Section>
      <Section title="Saved SSH servers">
        <ErrorNote error={servers.error} />
        {servers.data === 'off' && <p className="muted">Saved servers are turned off on this deployment (no credentials key).</p>}
        {servers.data !== 'off' && servers.data?.data.length === 0 && <p className="muted">No saved servers.</p>}
        <ul className="plain">
          {servers.data !== 'off' && servers.data?.data.map((s) => (
            <li key={s.id}><strong>{s.name}</strong> {s.username}@{s.host}:{s.port} <StatusBadge status={s.host_key_pinned_at ? 'host_key_pinned' : 'host_key_not_pinned'} /></li>
          ))}
        </ul>
      </Section>
    </>
  );
}

/** /v1/servers answers 503 when the deployment has no credentials key: that is a state, not an error. */
async function optional<T>(p: Promise<T>): Promise<T | 'off'> {
  try {
    return await p;
  } catch (err) {
    if (err instanceof ApiError && err.status === 503) return 'off';
    throw err;
  }
}

function firstSentence(text: string): string {
  // A full stop before a capital or the end: "e.g. `src/**`" does not end a sentence.
  const end = text.search(/\.(\s+[A-Z(]|$)/);
  return end > 0 && end < 160 ? text.slice(0, end + 1) : text.slice(0, 160);
}

/**
 * A tenant's saved run defaults as one switch per tool: off puts the tool in
 * `run_defaults.disabled`, so the tenant's runs leave it out unless a run enables it.
 */
function SavedToolSwitches({ adminToken, tools }: { adminToken: string; tools: Tool[] }) {
  const tenants = useLoad((signal) => request<Page<Tenant>>(adminToken, '/v1/admin/tenants', { signal }), 'tenants');
  const [tenantId, setTenantId] = useState('');
  const tenant = useLoad((signal) => (tenantId ? request<Tenant>(adminToken, `/v1/admin/tenants/${seg(tenantId)}`, { signal }) : Promise.resolve(undefined)), tenantId);
  const action = useAction();
  const defaults = tenant.data?.run_defaults ?? {};
  const disabled = new Set(Array.isArray(defaults.disabled) ? (defaults.disabled as string[]) : []);
  const toggle = (name: string, on: boolean) =>
    action.run(async () => {
      const next = new Set(disabled);
      if (on) next.delete(name);
      else next.add(name);
      const runDefaults = { ...defaults, disabled: [...next].sort() };
      if (next.size === 0) delete (runDefaults as Record<string, unknown>).disabled;
      await request(adminToken, `/v1/admin/tenants/${seg(tenantId)}`, { method: 'PATCH', body: { run_defaults: Object.keys(runDefaults).length ? runDefaults : null } });
      tenant.reload();
    });
  return (
    <Section title="Saved defaults: tools per tenant">
      <ErrorNote error={tenants.error ?? tenant.error ?? action.error} />
      <label htmlFor="defaults-tenant">Tenant</label>
      <select id="defaults-tenant" value={tenantId} onChange={(e) => setTenantId(e.target.value)}>
        <option value="">Choose a tenant</option>
        {tenants.data?.data.map((t) => (<option key={t.id} value={t.id}>{t.name} ({t.id})</option>))}
      </select>
      {tenantId && tenant.data && (
        <fieldset className="switches">
          <legend>Tools the tenant&apos;s runs may use (saved as run_defaults.disabled; a run or key that sets its own disabled list replaces it)</legend>
          {tools.map((t) => (
            <label key={t.name} className="switch">
              <input type="checkbox" role="switch" checked={!disabled.has(t.name)} disabled={action.busy} onChange={(e) => void toggle(t.name, e.target.checked)} />
              <code>{t.name}</code>
            </label>
          ))}
        </fieldset>
      )}
    </Section>
  );
}
