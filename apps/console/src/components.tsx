import { ReactNode, useEffect, useState } from 'react';

export function ErrorNote({ error }: { error: string | null | undefined }) {
  if (!error) return null;
  return (
    <p className="error" role="alert">
      {error}
    </p>
  );
}

export function StatusBadge({ status }: { status: string }) {
  return <span className={`badge badge-${status}`}>{status.replace(/_/g, ' ')}</span>;
}

/** "3 min ago", refreshed every few seconds; the exact time in the tooltip. */
export function Age({ at }: { at: string }) {
  const [, setNow] = useState(0);
  useEffect(() => {
    const timer = setInterval(() => setNow((n) => n + 1), 5_000);
    return () => clearInterval(timer);
  }, []);
  return (
    <time dateTime={at} title={new Date(at).toLocaleString()}>
      {ago(Date.now() - new Date(at).getTime())}
    </time>
  );
}

function ago(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86_400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86_400)} d ago`;
}

/** Text longer than this many characters or lines starts collapsed. */
const COLLAPSE_CHARS = 1_500;
const COLLAPSE_LINES = 20;

/** A block of preformatted text; a long one starts collapsed behind a summary. */
export function LongText({ text, label }: { text: string; label: string }) {
  const lines = text.split('\n').length;
  if (text.length <= COLLAPSE_CHARS && lines <= COLLAPSE_LINES) return <pre className="text">{text}</pre>;
  return (
    <details className="long">
      <summary>
        {label}: {lines} lines, {text.length.toLocaleString()} characters (show)
      </summary>
      <pre className="text">{text}</pre>
    </details>
  );
}

export function Json({ value, label }: { value: unknown; label: string }) {
  const text = typeof value === 'string' ? prettyIfJson(value) : JSON.stringify(value, null, 2);
  return <LongText text={text ?? ''} label={label} />;
}

function prettyIfJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

export function Section({ title, children, actions }: { title: string; children: ReactNode; actions?: ReactNode }) {
  return (
    <section className="panel" aria-label={title}>
      <div className="panel-head">
        <h2>{title}</h2>
        {actions}
      </div>
      {children}
    </section>
  );
}
