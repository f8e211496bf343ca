import { useEffect, useState } from 'react';
import { request, requestBlob, seg } from '../api';
import { ErrorNote, Section } from '../components';

interface ToolResult {
  output: string;
  is_error: boolean;
  metadata: Record<string, unknown>;
}

interface Entry {
  path: string;
  name: string;
  folder: boolean;
  /** A symlink: listed, never followed (the sandbox does not follow links that leave the workspace). */
  link: boolean;
}

/** The entries of list_files' answer (one per line; folders end with /; notes start with … or "("). */
export function parseListing(output: string): Entry[] {
  return output
    .split('\n')
    .filter((line) => line && !line.startsWith('…') && !line.startsWith('('))
    .map((line) => {
      const link = line.includes(' -> ');
      const path = link ? line.slice(0, line.indexOf(' -> ')) : line;
      const folder = !link && path.endsWith('/');
      const trimmed = folder ? path.slice(0, -1) : path;
      return { path: trimmed, name: trimmed.slice(trimmed.lastIndexOf('/') + 1) + (folder ? '/' : ''), folder, link };
    });
}

/**
 * The session's workspace, read-only: a folder tree (list_files run directly in the sandbox)
 * and a viewer (the files API). Opening it starts the sandbox when it is idle, so it waits for
 * a click rather than starting one on every visit.
 */
export function Workspace({ token, sessionId }: { token: string; sessionId: string }) {
  const [open, setOpen] = useState(false);
  const [selected, setSelected] = useState<string | null>(null);
  useEffect(() => {
    setOpen(false);
    setSelected(null);
  }, [sessionId]);
  return (
    <Section title="Workspace">
      {!open ? (
        <>
          <p className="muted">Browsing the files starts the session&apos;s sandbox if it is idle: a second or two, and it holds one of the tenant&apos;s sandboxes until it is idle again.</p>
          <button type="button" className="primary" onClick={() => setOpen(true)}>Open the workspace</button>
        </>
      ) : (
        <div className="workspace">
          <nav className="tree" aria-label="Workspace files">
            <Folder token={token} sessionId={sessionId} path="." selected={selected} onOpen={setSelected} />
          </nav>
          <div className="viewer">{selected ? <FileViewer token={token} sessionId={sessionId} path={selected} /> : <p className="muted">Choose a file to read it.</p>}</div>
        </div>
      )}
    </Section>
  );
}

function Folder({ token, sessionId, path, selected, onOpen }: { token: string; sessionId: string; path: string; selected: string | null; onOpen: (path: string) => void }) {
  const [entries, setEntries] = useState<Entry[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [expanded, setExpanded] = useState<Record<string, boolean>>({});
  useEffect(() => {
    const abort = new AbortController();
    request<ToolResult>(token, `/v1/sessions/${seg(sessionId)}/tools/list_files`, { method: 'POST', body: { arguments: { path } }, signal: abort.signal }).then(
      (result) => (result.is_error ? setError(result.output) : setEntries(parseListing(result.output))),
      (err: unknown) => !abort.signal.aborted && setError(err instanceof Error ? err.message : String(err)),
    );
    return () => abort.abort();
  }, [token, sessionId, path]);
  if (error) return <ErrorNote error={error} />;
  if (!entries) return <p className="muted">Listing {path === '.' ? 'the workspace' : path}…</p>;
  if (entries.length === 0) return <p className="muted">(empty)</p>;
  return (
    <ul>
      {entries.map((e) => (
        <li key={e.path}>
          {e.folder ? (
            <>
              <button type="button" className="link" aria-expanded={!!expanded[e.path]} onClick={() => setExpanded((x) => ({ ...x, [e.path]: !x[e.path] }))}>
                {expanded[e.path] ? '▾' : '▸'} {e.name}
              </button>
              {expanded[e.path] && <Folder token={token} sessionId={sessionId} path={e.path} selected={selected} onOpen={onOpen} />}
            </>
          ) : e.link ? (
            <span className="muted" title="symbolic link (not followed)">{e.name} (link)</span>
          ) : (
            <button type="button" className="link" aria-current={selected === e.path ? 'true' : undefined} onClick={() => onOpen(e.path)}>{e.name}</button>
          )}
        </li>
      ))}
    </ul>
  );
}

/** The viewer shows at most this much of a text file. */
const MAX_TEXT_BYTES = 2 * 1024 * 1024;

type Content = { kind: 'text'; lines: string[]; cut: boolean; size: number } | { kind: 'image'; url: string; size: number } | { kind: 'binary'; size: number; type: string };

function FileViewer({ token, sessionId, path }: { token: string; sessionId: string; path: string }) {
  const [content, setContent] = useState<Content | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const abort = new AbortController();
    let url: string | null = null;
    setContent(null);
    setError(null);
    requestBlob(token, `/v1/sessions/${seg(sessionId)}/files/${path.split('/').map(seg).join('/')}`, abort.signal)
      .then(async (blob) => {
        if (/^image\/(png|jpeg|gif|webp)$/.test(blob.type)) {
          url = URL.createObjectURL(blob);
          return setContent({ kind: 'image', url, size: blob.size });
        }
        const head = new Uint8Array(await blob.slice(0, MAX_TEXT_BYTES).arrayBuffer());
        if (head.subarray(0, 8192).includes(0)) return setContent({ kind: 'binary', size: blob.size, type: blob.type });
        const text = new TextDecoder('utf-8', { fatal: false }).decode(head);
        setContent({ kind: 'text', lines: text.split('\n'), cut: blob.size > MAX_TEXT_BYTES, size: blob.size });
      })
      .catch((err: unknown) => !abort.signal.aborted && setError(err instanceof Error ? err.message : String(err)));
    return () => {
      abort.abort();
      if (url) URL.revokeObjectURL(url);
    };
  }, [token, sessionId, path]);
  return (
    <div className="file" data-testid="file-viewer">
      <h3>{path}</h3>
      <ErrorNote error={error} />
      {!content && !error && <p className="muted">Reading…</p>}
      {content?.kind === 'image' && <img className="shot" src={content.url} alt={`${path} (${content.size} bytes)`} />}
      {content?.kind === 'binary' && <p className="muted">A binary file ({content.type || 'unknown type'}, {content.size.toLocaleString()} bytes): not shown.</p>}
      {content?.kind === 'text' && (
        <>
          <ol className="lines" aria-label={`${path}, with line numbers`}>
            {content.lines.map((line, i) => (<li key={i}><code>{line || ' '}</code></li>))}
          </ol>
          {content.cut && <p className="muted">Only the first {MAX_TEXT_BYTES / 1024 / 1024} MiB of {content.size.toLocaleString()} bytes are shown.</p>}
        </>
      )}
    </div>
  );
}
