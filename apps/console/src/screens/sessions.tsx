import { useState } from 'react';
import { request, seg } from '../api';
import { Age, ErrorNote, LongText, Section, StatusBadge } from '../components';
import { go, useAction, useLoad } from '../hooks';
import type { Message, Page, Session, Todo } from '../types';
import { Workspace } from './workspace';

export function SessionsList({ token }: { token: string }) {
  const sessions = useLoad((signal) => request<Page<Session>>(token, '/v1/sessions?limit=100', { signal }), 'sessions', 5_000);
  const remove = useAction();
  return (
    <Section title="Sessions">
      <ErrorNote error={sessions.error ?? remove.error} />
      {sessions.data && sessions.data.data.length === 0 && <p className="muted">No sessions yet.</p>}
      {sessions.data && sessions.data.data.length > 0 && (
        <div className="table-wrap">
          <table>
            <caption className="sr-only">Sessions, newest first</caption>
            <thead><tr><th scope="col">Session</th><th scope="col">Status</th><th scope="col">Sandbox</th><th scope="col">Created</th><th scope="col"><span className="sr-only">Actions</span></th></tr></thead>
            <tbody>
              {sessions.data.data.map((s) => (
                <tr key={s.id}>
                  <td><a href={`#/sessions/${seg(s.id)}`}>{s.id}</a></td>
                  <td><StatusBadge status={s.status} /></td>
                  <td>{s.sandbox?.state ?? '—'}</td>
                  <td><Age at={s.created_at} /></td>
                  <td>
                    <DeleteSessionButton id={s.id} busy={remove.busy} onDelete={(id) => remove.run(async () => {
                      await request(token, `/v1/sessions/${seg(id)}`, { method: 'DELETE' });
                      sessions.reload();
                    })} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Section>
  );
}

/** Deleting removes the sandbox and its workspace for good, so it asks once more. */
function DeleteSessionButton({ id, busy, onDelete }: { id: string; busy: boolean; onDelete: (id: string) => Promise<void> }) {
  const [confirming, setConfirming] = useState(false);
  if (!confirming) return <button type="button" className="danger" disabled={busy} onClick={() => setConfirming(true)} aria-label={`Delete session ${id}`}>Delete</button>;
  return (
    <span className="confirm">
      <button type="button" className="danger" disabled={busy} onClick={() => void onDelete(id)} aria-label={`Really delete session ${id} and its workspace`}>Delete for good</button>{' '}
      <button type="button" onClick={() => setConfirming(false)}>Keep</button>
    </span>
  );
}

export function SessionView({ token, sessionId }: { token: string; sessionId: string }) {
  const session = useLoad((signal) => request<Session>(token, `/v1/sessions/${seg(sessionId)}`, { signal }), sessionId, 5_000);
  const todos = useLoad((signal) => request<Page<Todo>>(token, `/v1/sessions/${seg(sessionId)}/todos`, { signal }), sessionId, 5_000);
  const messages = useLoad((signal) => request<Page<Message>>(token, `/v1/sessions/${seg(sessionId)}/messages`, { signal }), sessionId);
  const remove = useAction();
  const s = session.data;
  return (
    <>
      <Section title={`Session ${sessionId}`} actions={
        <DeleteSessionButton id={sessionId} busy={remove.busy} onDelete={(id) => remove.run(async () => {
          await request(token, `/v1/sessions/${seg(id)}`, { method: 'DELETE' });
          go('sessions');
        })} />
      }>
        <ErrorNote error={session.error ?? remove.error} />
        {s && (
          <dl className="facts">
            <dt>Status</dt><dd><StatusBadge status={s.status} /></dd>
            <dt>Sandbox</dt><dd>{s.sandbox?.state ?? '—'}</dd>
            <dt>Created</dt><dd><Age at={s.created_at} /></dd>
          </dl>
        )}
      </Section>
      <Workspace token={token} sessionId={sessionId} />
      <Section title="Todo list">
        <ErrorNote error={todos.error} />
        {todos.data && todos.data.data.length === 0 && <p className="muted">The session has no todo items.</p>}
        <ul className="todos">
          {todos.data?.data.map((t, i) => (
            <li key={t.id ?? i}><StatusBadge status={t.status} /> {t.content ?? t.text}</li>
          ))}
        </ul>
      </Section>
      <Section title="Message history" actions={<button type="button" onClick={messages.reload}>Reload</button>}>
        <ErrorNote error={messages.error} />
        <ol className="messages">
          {messages.data?.data.map((m) => (
            <li key={m.id} className={`message message-${m.role}`}>
              <h3>{m.role}{m.tool_call_id ? ` (result of ${m.tool_call_id})` : ''}</h3>
              {m.content && <LongText text={m.content} label="Message" />}
              {m.tool_calls?.map((c) => (
                <p key={c.id}><code>{c.function.name}</code> <code className="args">{typeof c.function.arguments === 'string' ? c.function.arguments : JSON.stringify(c.function.arguments)}</code></p>
              ))}
            </li>
          ))}
        </ol>
      </Section>
    </>
  );
}
