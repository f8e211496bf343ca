import { FormEvent, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { ApiError, errorText, request } from './api';
import { Credentials, loadCredentials, saveCredentials } from './credentials';
import { useRoute } from './hooks';
import { AdminPage } from './screens/admin';
import { MemoryPage } from './screens/memory';
import { RunView } from './screens/run-view';
import { RunsList } from './screens/runs-list';
import { SessionsList, SessionView } from './screens/sessions';
import { SkillsPage } from './screens/skills';
import { StartRun } from './screens/start-run';
import { ToolsPage } from './screens/tools';
import './styles.css';

const NAV: Array<[string, string, 'key' | 'admin']> = [
  ['runs', 'Runs', 'key'],
  ['new', 'Start a run', 'key'],
  ['sessions', 'Sessions', 'key'],
  ['tools', 'Tools', 'key'],
  ['memory', 'Memory', 'key'],
  ['skills', 'Skills', 'key'],
  ['admin', 'Admin', 'admin'],
];

function App() {
  const [credentials, setCredentials] = useState<Credentials>(loadCredentials);
  const signOut = () => {
    saveCredentials({ apiKey: null, adminToken: null });
    setCredentials({ apiKey: null, adminToken: null });
  };
  if (!credentials.apiKey && !credentials.adminToken) {
    return <SignIn onSignedIn={(c) => { saveCredentials(c); setCredentials(c); }} />;
  }
  return <Shell credentials={credentials} onSignOut={signOut} />;
}

function Shell({ credentials, onSignOut }: { credentials: Credentials; onSignOut: () => void }) {
  const route = useRoute();
  const { apiKey, adminToken } = credentials;
  const page = route[0] ?? (apiKey ? 'runs' : 'admin');
  const needsKey = page !== 'admin';
  return (
    <>
      <a className="skip" href="#main">Skip to content</a>
      <header className="top">
        <span className="brand">Runbox</span>
        <nav aria-label="Console">
          <ul>
            {NAV.filter(([, , needs]) => (needs === 'key' ? apiKey : adminToken)).map(([id, label]) => (
              <li key={id}><a href={`#/${id}`} aria-current={page === id ? 'page' : undefined}>{label}</a></li>
            ))}
          </ul>
        </nav>
        <button type="button" onClick={onSignOut}>Sign out</button>
      </header>
      <main id="main" tabIndex={-1}>
        {needsKey && !apiKey ? (
          <p>This page needs an API key: sign out and sign in with one.</p>
        ) : page === 'runs' && route[1] ? (
          <RunView key={route[1]} token={apiKey!} runId={route[1]} />
        ) : page === 'runs' ? (
          <RunsList token={apiKey!} />
        ) : page === 'new' ? (
          <StartRun token={apiKey!} />
        ) : page === 'sessions' && route[1] ? (
          <SessionView key={route[1]} token={apiKey!} sessionId={route[1]} />
        ) : page === 'sessions' ? (
          <SessionsList token={apiKey!} />
        ) : page === 'tools' ? (
          <ToolsPage token={apiKey!} adminToken={adminToken} />
        ) : page === 'memory' ? (
          <MemoryPage token={apiKey!} />
        ) : page === 'skills' ? (
          <SkillsPage token={apiKey!} />
        ) : page === 'admin' && adminToken ? (
          <AdminPage adminToken={adminToken} />
        ) : (
          <p>There is no page {page}. <a href="#/runs">Runs</a></p>
        )}
      </main>
    </>
  );
}

/** Checks each credential against the API before keeping it, so a typo is caught here. */
function SignIn({ onSignedIn }: { onSignedIn: (c: Credentials) => void }) {
  const [apiKey, setApiKey] = useState('');
  const [adminToken, setAdminToken] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const key = apiKey.trim() || null;
      const admin = adminToken.trim() || null;
      if (!key && !admin) throw new Error('Enter an API key, the admin token, or both.');
      if (key) await check(() => request(key, '/v1/runs?limit=1'), 'The API key');
      if (admin) await check(() => request(admin, '/v1/admin/tenants?limit=1'), 'The admin token');
      onSignedIn({ apiKey: key, adminToken: admin });
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main id="main" className="signin">
      <h1>Runbox console</h1>
      <form className="form" onSubmit={(e) => void submit(e)}>
        <label htmlFor="api-key">API key</label>
        <input id="api-key" type="password" autoComplete="off" spellCheck={false} value={apiKey} onChange={(e) => setApiKey(e.target.value)} />
        <label htmlFor="admin-token">Admin token (optional: tenants and keys)</label>
        <input id="admin-token" type="password" autoComplete="off" spellCheck={false} value={adminToken} onChange={(e) => setAdminToken(e.target.value)} />
        <div><button type="submit" className="primary" disabled={busy}>Sign in</button></div>
        {error && <p className="error" role="alert">{error}</p>}
        <p className="muted small">Kept in this tab&apos;s session storage until you sign out or close the tab.</p>
      </form>
    </main>
  );
}

async function check(call: () => Promise<unknown>, what: string): Promise<void> {
  try {
    await call();
  } catch (err) {
    if (err instanceof ApiError && (err.status === 401 || err.status === 403)) throw new Error(`${what} was not accepted.`);
    throw err;
  }
}

createRoot(document.getElementById('root')!).render(<App />);
