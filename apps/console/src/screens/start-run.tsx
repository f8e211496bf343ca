import { FormEvent, useState } from 'react';
import { request } from '../api';
import { ErrorNote, Section } from '../components';
import { go, useAction, useLoad } from '../hooks';
import type { Page, Run, Toolset } from '../types';

/** Starts a run: input, toolset and approval mode, optionally in an existing session. */
export function StartRun({ token }: { token: string }) {
  const toolsets = useLoad((signal) => request<Page<Toolset>>(token, '/v1/toolsets', { signal }), 'toolsets');
  const [input, setInput] = useState('');
  const [toolset, setToolset] = useState('');
  const [approval, setApproval] = useState('');
  const [session, setSession] = useState('');
  const action = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void action.run(async () => {
      const body = {
        input,
        ...(toolset ? { toolset } : {}),
        ...(approval ? { approval_mode: approval } : {}),
        ...(session.trim() ? { session_id: session.trim() } : {}),
      };
      const run = await request<Run>(token, '/v1/runs', { method: 'POST', body });
      go('runs', run.id);
    });
  };
  return (
    <Section title="Start a run">
      <form className="form" onSubmit={submit}>
        <label htmlFor="run-input">Input</label>
        <textarea id="run-input" required rows={5} value={input} onChange={(e) => setInput(e.target.value)} />
        <label htmlFor="run-toolset">Toolset</label>
        <select id="run-toolset" value={toolset} onChange={(e) => setToolset(e.target.value)}>
          <option value="">Saved default</option>
          {toolsets.data?.data.map((t) => (<option key={t.name} value={t.name}>{t.name} ({t.tools.length} tools)</option>))}
        </select>
        <label htmlFor="run-approval">Approval mode</label>
        <select id="run-approval" value={approval} onChange={(e) => setApproval(e.target.value)}>
          <option value="">Saved default</option>
          <option value="auto">auto: run every call</option>
          <option value="prompt">prompt: ask before calls that change state</option>
          <option value="deny">deny: refuse calls that change state</option>
        </select>
        <label htmlFor="run-session">Session id (optional; empty starts a new session)</label>
        <input id="run-session" value={session} onChange={(e) => setSession(e.target.value)} />
        <div>
          <button type="submit" className="primary" disabled={action.busy || !input.trim()}>Start</button>
        </div>
        <ErrorNote error={action.error ?? toolsets.error} />
      </form>
    </Section>
  );
}
