import { FormEvent, useEffect, useState } from 'react';
import { request, requestBlob, seg } from '../api';
import { Age, ErrorNote, Json, LongText, Section, StatusBadge } from '../components';
import { useAction, useLoad } from '../hooks';
import { followEvents } from '../sse';
import { applyEvent, emptyTimeline, isTerminalEvent, RunEvent, Timeline, ToolCallItem } from '../timeline';
import type { Run } from '../types';

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/** One run: its state, its timeline as it happens, and the controls (cancel, approvals). */
export function RunView({ token, runId }: { token: string; runId: string }) {
  const run = useLoad((signal) => request<Run>(token, `/v1/runs/${seg(runId)}`, { signal }), runId);
  const cancel = useAction();
  const r = run.data;
  return (
    <>
      <Section
        title={`Run ${runId}`}
        actions={
          r && !TERMINAL.has(r.status) ? (
            <button type="button" className="danger" disabled={cancel.busy} onClick={() => void cancel.run(async () => {
              await request(token, `/v1/runs/${seg(runId)}/cancel`, { method: 'POST', body: {} });
              run.reload();
            })}>
              Cancel run
            </button>
          ) : null
        }
      >
        <ErrorNote error={run.error ?? cancel.error} />
        {r && (
          <dl className="facts">
            <dt>Status</dt>
            <dd data-testid="run-status"><StatusBadge status={r.status} /></dd>
            <dt>Session</dt>
            <dd><a href={`#/sessions/${seg(r.session_id)}`}>{r.session_id}</a></dd>
            <dt>Model</dt>
            <dd>{r.options.model ?? 'default'}</dd>
            <dt>Toolset</dt>
            <dd>{r.options.toolset ?? '—'}, approvals: {r.options.approval_mode ?? 'auto'}</dd>
            <dt>Created</dt>
            <dd><Age at={r.created_at} /></dd>
            {r.parent_run_id && (<><dt>Parent run</dt><dd><a href={`#/runs/${seg(r.parent_run_id)}`}>{r.parent_run_id}</a></dd></>)}
            {r.started_at && r.completed_at && (<><dt>Took</dt><dd>{((Date.parse(r.completed_at) - Date.parse(r.started_at)) / 1000).toFixed(1)} s</dd></>)}
            {r.usage && (<><dt>Usage</dt><dd>{usageText(r.usage)}</dd></>)}
          </dl>
        )}
      </Section>
      <Section title="Timeline">
        <RunTimeline token={token} runId={runId} sessionId={r?.session_id} onChange={run.reload} />
      </Section>
    </>
  );
}

function usageText(usage: Record<string, number>): string {
  return Object.entries(usage).map(([k, v]) => `${k.replace(/_/g, ' ')} ${v}`).join(' · ');
}

/**
 * The run's events drawn as they arrive. `onChange` is told when the run's state changed
 * (an approval asked or answered, the run ended), so the summary above reloads.
 */
export function RunTimeline({ token, runId, sessionId, onChange }: { token: string; runId: string; sessionId?: string; onChange?: () => void }) {
  const [timeline, setTimeline] = useState<Timeline>(emptyTimeline);
  const [streamError, setStreamError] = useState<string | null>(null);
  useEffect(() => {
    setTimeline(emptyTimeline());
    const abort = new AbortController();
    void followEvents(`/v1/runs/${seg(runId)}/events`, {
      token,
      signal: abort.signal,
      onEvent: (e) => {
        let data: Record<string, unknown> = {};
        try {
          data = JSON.parse(e.data) as Record<string, unknown>;
        } catch {
          data = {};
        }
        const event: RunEvent = { id: e.id, type: e.event, data };
        setTimeline((t) => applyEvent(t, event));
        if (/^run\.|approval|denied|approved/.test(e.event)) onChange?.();
      },
      isFinal: (e) => isTerminalEvent(e.event),
      onError: setStreamError,
    });
    return () => abort.abort();
    // onChange is a stable dispatcher: the stream restarts only for another run.
  }, [token, runId]);
  return (
    <div className="timeline" aria-live="polite" data-testid={`timeline-${runId}`}>
      <ErrorNote error={streamError} />
      {timeline.items.length === 0 && <p className="muted">Waiting for events…</p>}
      <ol className="events">
        {timeline.items.map((item) => {
          switch (item.kind) {
            case 'input':
              return (<li key={item.key} className="event input"><h3>Input</h3><LongText text={item.text} label="Input" /></li>);
            case 'turn':
              return (
                <li key={item.key} className="event turn">
                  <h3>Model{item.streaming ? ' (streaming)' : ''}</h3>
                  {item.text && <LongText text={item.text} label="Answer" />}
                  {item.toolCallIds.length > 0 && (
                    <ol className="calls">
                      {item.toolCallIds.map((id) => timeline.calls[id] && (
                        <ToolCallView key={id} token={token} runId={runId} sessionId={sessionId} call={timeline.calls[id]} />
                      ))}
                    </ol>
                  )}
                </li>
              );
            case 'warning':
              return (<li key={item.key} className="event warning" role="note"><h3>Guardrail warning</h3><p>{item.text}</p></li>);
            case 'note':
              return (<li key={item.key} className="event note"><p>{item.text}</p></li>);
            case 'end':
              return (
                <li key={item.key} className={`event end end-${item.status}`}>
                  <h3>Run {item.status}</h3>
                  {item.text && <LongText text={item.text} label="Output" />}
                  {item.usage && <p className="muted">{usageText(item.usage)}</p>}
                </li>
              );
          }
        })}
      </ol>
    </div>
  );
}

const IMAGE_PATH = /\.(png|jpe?g|gif|webp)$/i;

function ToolCallView({ token, runId, sessionId, call }: { token: string; runId: string; sessionId?: string; call: ToolCallItem }) {
  const imagePath = typeof call.metadata?.path === 'string' && IMAGE_PATH.test(call.metadata.path) ? call.metadata.path : null;
  return (
    <li className={`call call-${call.state}`} data-testid={`call-${call.name}`} aria-label={`tool call ${call.name}`}>
      <div className="call-head">
        <code className="tool-name">{call.name}</code> <StatusBadge status={call.state} />
      </div>
      <Json value={call.args} label="Arguments" />
      {call.reason && <p className="muted">Reason: {call.reason}</p>}
      {call.state === 'awaiting_approval' && <ApprovalForm token={token} runId={runId} call={call} />}
      {call.output !== undefined && (
        <div className="result">
          <h4>Result</h4>
          <LongText text={call.output} label="Result" />
        </div>
      )}
      {imagePath && sessionId && <WorkspaceImage token={token} sessionId={sessionId} path={imagePath} />}
      {call.subRunId && (
        <details className="subrun" open>
          <summary>Sub-run <a href={`#/runs/${seg(call.subRunId)}`}>{call.subRunId}</a></summary>
          <RunTimeline token={token} runId={call.subRunId} sessionId={sessionId} />
        </details>
      )}
    </li>
  );
}

function ApprovalForm({ token, runId, call }: { token: string; runId: string; call: ToolCallItem }) {
  const [reason, setReason] = useState('');
  const action = useAction();
  const decide = (decision: 'approve' | 'deny') => (e?: FormEvent) => {
    e?.preventDefault();
    void action.run(async () => {
      const body = { tool_call_id: call.id, decision, ...(decision === 'deny' && reason.trim() ? { reason: reason.trim() } : {}) };
      await request(token, `/v1/runs/${seg(runId)}/approvals`, { method: 'POST', body });
    });
  };
  const field = `reason-${call.id}`;
  return (
    <form className="approval" onSubmit={decide('deny')} aria-label={`approve or deny ${call.name}`}>
      <p><strong>{call.name}</strong> waits for your decision.</p>
      <button type="button" className="primary" disabled={action.busy} onClick={decide('approve')}>Approve</button>
      <label htmlFor={field}>Reason for denying (optional)</label>
      <input id={field} value={reason} maxLength={2000} onChange={(e) => setReason(e.target.value)} />
      <button type="submit" className="danger" disabled={action.busy}>Deny</button>
      <ErrorNote error={action.error} />
    </form>
  );
}

/** An image from the workspace, fetched with the key and shown as a blob URL. */
export function WorkspaceImage({ token, sessionId, path }: { token: string; sessionId: string; path: string }) {
  const [url, setUrl] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const abort = new AbortController();
    let made: string | null = null;
    requestBlob(token, `/v1/sessions/${seg(sessionId)}/files/${path.split('/').map(seg).join('/')}`, abort.signal).then(
      (blob) => {
        made = URL.createObjectURL(blob);
        setUrl(made);
      },
      (err: unknown) => !abort.signal.aborted && setError(err instanceof Error ? err.message : String(err)),
    );
    return () => {
      abort.abort();
      if (made) URL.revokeObjectURL(made);
    };
  }, [token, sessionId, path]);
  if (error) return <p className="muted">Image {path} could not be shown: {error}</p>;
  return url ? <img className="shot" src={url} alt={`image ${path} from the workspace`} /> : null;
}
