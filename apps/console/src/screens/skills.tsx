import { FormEvent, useState } from 'react';
import { request, seg } from '../api';
import { ErrorNote, LongText, Section } from '../components';
import { useAction, useLoad } from '../hooks';
import type { Page, Skill } from '../types';

export function SkillsPage({ token }: { token: string }) {
  const [query, setQuery] = useState('');
  const [search, setSearch] = useState('');
  const [open, setOpen] = useState<string | null>(null);
  const list = useLoad((signal) => request<Page<Skill>>(token, `/v1/skills${search ? `?query=${seg(search)}` : ''}`, { signal }), `skills:${search}`);
  const remove = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setSearch(query.trim());
  };
  return (
    <Section title="Skills">
      <form className="search" role="search" onSubmit={submit}>
        <label htmlFor="skills-query">Search skills</label>
        <input id="skills-query" type="search" value={query} onChange={(e) => setQuery(e.target.value)} />
        <button type="submit">Search</button>
      </form>
      <ErrorNote error={list.error ?? remove.error} />
      {list.data?.data.length === 0 && <p className="muted">No skill matches.</p>}
      <ul className="cards">
        {list.data?.data.map((s) => (
          <li key={s.name} className="card">
            <p><strong>{s.name}</strong>{s.builtin ? ' (built-in)' : ''}</p>
            <p className="muted small">{s.description}</p>
            <button type="button" aria-expanded={open === s.name} onClick={() => setOpen(open === s.name ? null : s.name)}>{open === s.name ? 'Hide' : 'Read'}</button>{' '}
            {!s.builtin && (
              <button type="button" className="danger" disabled={remove.busy} aria-label={`Delete skill ${s.name}`} onClick={() => void remove.run(async () => {
                await request(token, `/v1/skills/${seg(s.name)}`, { method: 'DELETE' });
                list.reload();
              })}>Delete</button>
            )}
            {open === s.name && <SkillText token={token} name={s.name} />}
          </li>
        ))}
      </ul>
    </Section>
  );
}

function SkillText({ token, name }: { token: string; name: string }) {
  const skill = useLoad((signal) => request<Skill>(token, `/v1/skills/${seg(name)}`, { signal }), name);
  return (
    <>
      <ErrorNote error={skill.error} />
      {skill.data?.content && <LongText text={skill.data.content} label={name} />}
    </>
  );
}
