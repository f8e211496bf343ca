import { FormEvent, useState } from 'react';
import { request, seg } from '../api';
import { Age, ErrorNote, Section } from '../components';
import { useAction, useLoad } from '../hooks';
import type { Memory, Page } from '../types';

export function MemoryPage({ token }: { token: string }) {
  const [query, setQuery] = useState('');
  const [search, setSearch] = useState('');
  const list = useLoad((signal) => request<Page<Memory>>(token, `/v1/memory?limit=200${search ? `&query=${seg(search)}` : ''}`, { signal }), `memory:${search}`);
  const remove = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setSearch(query.trim());
  };
  return (
    <Section title="Memory">
      <form className="search" role="search" onSubmit={submit}>
        <label htmlFor="memory-query">Search facts</label>
        <input id="memory-query" type="search" value={query} onChange={(e) => setQuery(e.target.value)} />
        <button type="submit">Search</button>
      </form>
      <ErrorNote error={list.error ?? remove.error} />
      {list.data?.data.length === 0 && <p className="muted">{search ? 'No fact matches.' : 'No facts saved.'}</p>}
      <ul className="cards">
        {list.data?.data.map((m) => (
          <li key={m.id} className="card">
            <p>{m.content}</p>
            <p className="muted small">scope {m.scope ?? 'shared'} · <Age at={m.created_at} /></p>
            <button type="button" className="danger" disabled={remove.busy} aria-label={`Delete the fact: ${m.content.slice(0, 60)}`} onClick={() => void remove.run(async () => {
              await request(token, `/v1/memory/${seg(m.id)}`, { method: 'DELETE' });
              list.reload();
            })}>Delete</button>
          </li>
        ))}
      </ul>
    </Section>
  );
}
