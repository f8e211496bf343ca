import { request } from '../api';
import { Age, ErrorNote, Section, StatusBadge } from '../components';
import { useLoad } from '../hooks';
import type { Page, Run } from '../types';

/** How often the list is read again while it is on screen. */
const POLL_MS = 2_000;

/** The tenant's newest runs, read again every two seconds while shown. */
export function RunsList({ token }: { token: string }) {
  const runs = useLoad((signal) => request<Page<Run>>(token, '/v1/runs?limit=50', { signal }), 'runs', POLL_MS);
  return (
    <Section title="Runs" actions={<a className="button primary" href="#/new">Start a run</a>}>
      <ErrorNote error={runs.error} />
      {runs.data && runs.data.data.length === 0 && <p className="muted">No runs yet.</p>}
      {runs.data && runs.data.data.length > 0 && (
        <div className="table-wrap">
          <table data-testid="runs-table">
            <caption className="sr-only">Runs, newest first, updating live</caption>
            <thead>
              <tr><th scope="col">Run</th><th scope="col">Status</th><th scope="col">Age</th><th scope="col">Session</th><th scope="col">Model</th></tr>
            </thead>
            <tbody>
              {runs.data.data.map((run) => (
                <tr key={run.id}>
                  <td><a href={`#/runs/${encodeURIComponent(run.id)}`}>{run.id}</a>{run.parent_run_id ? ' (sub-run)' : ''}</td>
                  <td><StatusBadge status={run.status} /></td>
                  <td><Age at={run.created_at} /></td>
                  <td><a href={`#/sessions/${encodeURIComponent(run.session_id)}`}>{run.session_id}</a></td>
                  <td>{run.options.model ?? 'default'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Section>
  );
}
