/**
 * The reference page at GET /docs: static HTML and CSS, and a script that fetches
 * /openapi.json and renders it. Nothing is loaded from elsewhere and nothing runs inline,
 * so the page is served with a Content-Security-Policy that allows only its own files.
 *
 * The script is the function below, served as its own source text: it is type-checked and
 * linted with the rest of the gateway, and must stay self-contained (no imports, no helpers
 * outside it), since only its text reaches the browser.
 */

export const REFERENCE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export const REFERENCE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Runbox API reference</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/docs/reference.css">
<script src="/docs/reference.js" defer></script>
</head>
<body>
<header><h1>Runbox API reference</h1><p>The machine-readable document: <a href="/openapi.json">/openapi.json</a> (OpenAPI 3.1).</p></header>
<nav id="groups" aria-label="groups"></nav>
<main id="reference"><p id="status">Loading /openapi.json…</p></main>
</body>
</html>
`;

export const REFERENCE_CSS = `
:root { --fg: #1d2126; --muted: #5b6470; --line: #d8dde3; --code: #f3f5f7; --accent: #2457c5; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); display: grid; grid-template-columns: 14rem 1fr; }
header { grid-column: 1 / 3; padding: 1rem 2rem; border-bottom: 1px solid var(--line); }
header h1 { margin: 0; font-size: 1.4rem; }
header p { margin: .25rem 0 0; color: var(--muted); }
nav { padding: 1rem 1rem 1rem 2rem; border-right: 1px solid var(--line); position: sticky; top: 0; align-self: start; max-height: 100vh; overflow: auto; }
nav a { display: block; padding: .15rem 0; color: var(--accent); text-decoration: none; }
main { padding: 1rem 2rem 4rem; min-width: 0; }
h2 { margin: 2rem 0 .5rem; font-size: 1.2rem; border-bottom: 1px solid var(--line); padding-bottom: .25rem; }
details.operation { border: 1px solid var(--line); border-radius: 6px; margin: .5rem 0; }
details.operation > summary { cursor: pointer; padding: .5rem .75rem; display: flex; gap: .75rem; align-items: baseline; flex-wrap: wrap; }
details.operation[open] > summary { border-bottom: 1px solid var(--line); }
.body { padding: .5rem .75rem 1rem; }
.method { font: 600 .8rem ui-monospace, monospace; text-transform: uppercase; min-width: 4rem; }
.method.get { color: #1a7f37; } .method.post { color: #2457c5; } .method.patch, .method.put { color: #9a6700; } .method.delete { color: #cf222e; }
.path, code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: .9em; }
code { background: var(--code); padding: 0 .25rem; border-radius: 3px; }
.summary { color: var(--muted); }
.auth { margin-left: auto; font-size: .8rem; color: var(--muted); }
h4 { margin: 1rem 0 .25rem; font-size: .95rem; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; vertical-align: top; padding: .25rem .5rem; border-bottom: 1px solid var(--line); }
th { font-weight: 600; font-size: .85rem; color: var(--muted); }
ul.schema { list-style: none; margin: 0; padding-left: 1rem; border-left: 2px solid var(--line); }
ul.schema li { margin: .15rem 0; }
.type { color: var(--muted); font-size: .85rem; }
.required { color: #cf222e; font-size: .8rem; }
.note { color: var(--muted); }
`;

interface Element {
  textContent: string | null;
  className: string;
  id: string;
  appendChild(child: Element): Element;
  setAttribute(name: string, value: string): void;
  replaceChildren(...children: Element[]): void;
}
declare const document: { createElement(tag: string): Element; getElementById(id: string): Element | null };
declare function fetch(url: string): Promise<{ ok: boolean; status: number; json(): Promise<unknown> }>;

export function renderReference(): void {
  type Json = Record<string, unknown>;
  const METHODS = ['get', 'post', 'put', 'patch', 'delete'];
  const MAX_DEPTH = 6;

  function el(tag: string, text?: string, className?: string): Element {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (className) node.className = className;
    return node;
  }
  function obj(value: unknown): Json {
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : {};
  }
  function list(value: unknown): unknown[] {
    return Array.isArray(value) ? value : [];
  }

  function render(doc: Json): void {
    const components = obj(obj(doc.components).schemas);
    const resolve = (schema: Json): Json => {
      const ref = schema.$ref;
      if (typeof ref !== 'string') return schema;
      const target = obj(components[ref.replace('#/components/schemas/', '')]);
      const rest: Json = { ...schema };
      delete rest.$ref;
      return { ...target, ...rest, properties: { ...obj(target.properties), ...obj(rest.properties) } };
    };

    function typeOf(raw: Json): string {
      const schema = resolve(raw);
      if (schema.const !== undefined) return JSON.stringify(schema.const);
      if (Array.isArray(schema.enum)) return schema.enum.map((v) => JSON.stringify(v)).join(' | ');
      const type = Array.isArray(schema.type) ? schema.type.join(' | ') : typeof schema.type === 'string' ? schema.type : '';
      if (type === 'array') return `array of ${typeOf(obj(schema.items))}`;
      const choices = list(schema.anyOf ?? schema.oneOf);
      if (choices.length > 0) return choices.map((c) => typeOf(obj(c))).join(' | ');
      return type || 'any';
    }
    function constraints(schema: Json): string {
      const parts: string[] = [];
      for (const key of ['minLength', 'maxLength', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'minItems', 'maxItems', 'pattern', 'format', 'default']) {
        const value = schema[key];
        if (value !== undefined) parts.push(`${key} ${typeof value === 'string' ? value : JSON.stringify(value)}`);
      }
      return parts.join(', ');
    }
    /** Nested properties of an object (or of an array's items, or of each choice). */
    function fields(raw: Json, depth: number): Element | null {
      const schema = resolve(raw);
      if (depth > MAX_DEPTH) return null;
      if (schema.type === 'array') return fields(obj(schema.items), depth);
      const choices = list(schema.anyOf ?? schema.oneOf).map(obj).filter((c) => Object.keys(obj(resolve(c).properties)).length > 0);
      if (choices.length > 0) {
        const ul = el('ul', undefined, 'schema');
        for (const choice of choices) {
          const li = el('li');
          li.appendChild(el('span', `${typeof choice.title === 'string' ? choice.title : 'one of'}:`, 'type'));
          const inner = fields(choice, depth + 1);
          if (inner) li.appendChild(inner);
          ul.appendChild(li);
        }
        return ul;
      }
      const properties = obj(schema.properties);
      if (Object.keys(properties).length === 0) return null;
      const required = new Set(list(schema.required));
      const ul = el('ul', undefined, 'schema');
      for (const [name, rawProp] of Object.entries(properties)) {
        const prop = resolve(obj(rawProp));
        const li = el('li');
        li.appendChild(el('code', name));
        li.appendChild(el('span', ` ${typeOf(prop)} `, 'type'));
        if (required.has(name)) li.appendChild(el('span', 'required ', 'required'));
        const notes = [typeof prop.description === 'string' ? prop.description : '', constraints(prop)].filter(Boolean).join('; ');
        if (notes) li.appendChild(el('span', `— ${notes}`, 'note'));
        const inner = fields(prop, depth + 1);
        if (inner) li.appendChild(inner);
        ul.appendChild(li);
      }
      return ul;
    }
    function schemaBlock(schema: Json): Element {
      return fields(schema, 0) ?? el('p', typeOf(schema), 'type');
    }

    function parametersTable(parameters: Json[]): Element {
      const table = el('table');
      const head = el('tr');
      for (const h of ['name', 'in', 'type', 'description']) head.appendChild(el('th', h));
      table.appendChild(head);
      for (const p of parameters) {
        const schema = obj(p.schema);
        const row = el('tr');
        const name = el('td');
        name.appendChild(el('code', String(p.name)));
        if (p.required === true) name.appendChild(el('span', ' required', 'required'));
        row.appendChild(name);
        row.appendChild(el('td', String(p.in)));
        row.appendChild(el('td', typeOf(schema), 'type'));
        row.appendChild(el('td', [typeof p.description === 'string' ? p.description : '', constraints(schema)].filter(Boolean).join('; ')));
        table.appendChild(row);
      }
      return table;
    }

    function operationBlock(method: string, path: string, op: Json): Element {
      const details = el('details', undefined, 'operation');
      details.id = String(op.operationId);
      const summary = el('summary');
      summary.appendChild(el('span', method, `method ${method}`));
      summary.appendChild(el('span', path, 'path'));
      summary.appendChild(el('span', String(op.summary ?? ''), 'summary'));
      const security = list(op.security).flatMap((s) => Object.keys(obj(s)));
      summary.appendChild(el('span', security.length > 0 ? `auth: ${security.join(', ')}` : 'public', 'auth'));
      details.appendChild(summary);

      const body = el('div', undefined, 'body');
      if (typeof op.description === 'string') body.appendChild(el('p', op.description));
      const parameters = list(op.parameters).map(obj);
      if (parameters.length > 0) {
        body.appendChild(el('h4', 'Parameters'));
        body.appendChild(parametersTable(parameters));
      }
      const requestBody = obj(op.requestBody);
      const requestSchema = obj(obj(obj(requestBody.content)['application/json']).schema);
      if (Object.keys(requestSchema).length > 0) {
        body.appendChild(el('h4', `Body (JSON${requestBody.required === true ? '' : ', optional'})`));
        body.appendChild(schemaBlock(requestSchema));
      }
      const errors = el('table');
      for (const [status, rawResponse] of Object.entries(obj(op.responses))) {
        const response = obj(rawResponse);
        if (Number(status) >= 400) {
          const row = el('tr');
          row.appendChild(el('td', status));
          const codes = el('td');
          codes.appendChild(el('code', String(response.description)));
          row.appendChild(codes);
          errors.appendChild(row);
          continue;
        }
        body.appendChild(el('h4', `Answer ${status}`));
        const content = obj(response.content);
        const types = Object.keys(content);
        body.appendChild(el('p', types.length > 0 ? `${String(response.description)} (${types.join(', ')})` : String(response.description), 'note'));
        for (const type of types) {
          const schema = obj(obj(content[type]).schema);
          if (Object.keys(schema).length > 0 && schema.type !== 'string') body.appendChild(schemaBlock(schema));
        }
      }
      body.appendChild(el('h4', 'Errors'));
      body.appendChild(errors);
      details.appendChild(body);
      return details;
    }

    const byTag = new Map<string, Element[]>();
    for (const [path, rawItem] of Object.entries(obj(doc.paths))) {
      const item = obj(rawItem);
      for (const method of METHODS) {
        const op = obj(item[method]);
        if (Object.keys(op).length === 0) continue;
        const tag = String(list(op.tags)[0] ?? 'other');
        byTag.set(tag, [...(byTag.get(tag) ?? []), operationBlock(method, path, op)]);
      }
    }
    const main = document.getElementById('reference');
    const nav = document.getElementById('groups');
    if (!main || !nav) return;
    main.replaceChildren();
    nav.replaceChildren();
    for (const tag of [...byTag.keys()].sort()) {
      const link = el('a', tag);
      link.setAttribute('href', `#group-${tag}`);
      nav.appendChild(link);
      const heading = el('h2', tag);
      heading.id = `group-${tag}`;
      main.appendChild(heading);
      for (const block of byTag.get(tag) ?? []) main.appendChild(block);
    }
  }

  fetch('/openapi.json')
    .then(async (res) => {
      if (!res.ok) throw new Error(`GET /openapi.json answered ${res.status}`);
      render(obj(await res.json()));
    })
    .catch((err: unknown) => {
      const status = document.getElementById('status');
      if (status) status.textContent = `Could not load the document: ${err instanceof Error ? err.message : String(err)}`;
    });
}

/** The script as the browser gets it. */
export const REFERENCE_SCRIPT = `"use strict";\n(${renderReference.toString()})();\n`;
