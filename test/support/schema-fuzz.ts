import { z, ZodType } from 'zod';
import type { CatalogueRoute } from '../../apps/gateway/src/common/validation/route-catalogue';

/**
 * Fuzz cases generated from the routes' own zod schemas (via JSON Schema): for every string
 * field, record key, free-form value, typed field, query parameter, path parameter and header
 * a route declares, requests that put a lone surrogate, NUL, an overlong string or a wrong
 * type there, with everything else in the request valid. A field added to a schema is fuzzed
 * without any change here.
 */

interface JsonSchema {
  type?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  additionalProperties?: JsonSchema | boolean;
  propertyNames?: JsonSchema;
  anyOf?: JsonSchema[];
  enum?: unknown[];
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  minProperties?: number;
}

type Path = Array<string | number>;

/** A place in a body or query where the fuzzer puts a value. */
interface Slot {
  path: Path;
  /** `string`: typed text; `free`: any JSON (z.unknown); `typed`: a number or boolean; `key`: the keys of an object at `path`. */
  kind: 'string' | 'free' | 'typed' | 'key';
  maxLength?: number;
}

/** What the answer must be. */
export type Expectation =
  /** 400 whose message starts with the field's name. */
  | { kind: 'names'; field: string }
  /** 404 that does not echo what was sent. */
  | { kind: 'not_found'; sent: string }
  /** Any 4xx. */
  | { kind: '4xx' }
  /** Anything but a 5xx (a free-form field takes any JSON, so a 2xx is right). */
  | { kind: 'no_5xx' };

export interface FuzzCase {
  route: string;
  /** `body.metadata.k ← "\ud800"`: which slot got which value. */
  label: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
  expect: Expectation;
  /** The route changes or removes what its id names; its cases go last. */
  destructive: boolean;
}

export interface FuzzFixtures {
  /** A real id per kind a route's PathId names (`session`, `run`, `api key`, ...). */
  ids: Record<string, string>;
  tenantKey: string;
  adminToken: string;
  /** RUNBOX_MAX_JSON_STRING_CHARS: a free-form string one longer is overlong. */
  maxStringChars: number;
}

const LONE_SURROGATE = '\ud800';
const NUL = '\u0000';
const WRONG_TYPES: unknown[] = [12345, true, null, [], {}];

export function jsonSchemaOf(schema: ZodType): JsonSchema {
  return z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
}

/** Every slot of a schema, depth first. */
export function slotsOf(schema: JsonSchema, path: Path = []): Slot[] {
  const option = schema.anyOf?.find((s) => s.type !== 'null');
  if (option) return slotsOf(option, path);
  switch (schema.type) {
    case 'string':
      return [{ path, kind: 'string', maxLength: schema.maxLength }];
    case 'integer':
    case 'number':
    case 'boolean':
      return [{ path, kind: 'typed' }];
    case 'array':
      return schema.items ? slotsOf(schema.items, [...path, 0]) : [{ path: [...path, 0], kind: 'free' }];
    case 'object': {
      const slots: Slot[] = [{ path, kind: 'key', maxLength: schema.propertyNames?.maxLength }];
      for (const [name, property] of Object.entries(schema.properties ?? {})) slots.push(...slotsOf(property, [...path, name]));
      const values = schema.additionalProperties;
      if (values && typeof values === 'object') slots.push(...slotsOf(values, [...path, 'k']));
      return slots;
    }
    default:
      return [{ path, kind: 'free' }];
  }
}

/** The smallest value the schema accepts (as far as JSON Schema can say). */
export function minimalValue(schema: JsonSchema): unknown {
  const option = schema.anyOf?.find((s) => s.type !== 'null');
  if (option) return minimalValue(option);
  if (schema.enum) return schema.enum[0];
  switch (schema.type) {
    case 'string':
      return 'a'.repeat(Math.max(1, schema.minLength ?? 1));
    case 'integer':
    case 'number':
      return Math.max(1, schema.minimum ?? 1);
    case 'boolean':
      return true;
    case 'array':
      return [];
    case 'object': {
      // The required properties, then optional ones in order while minProperties asks for more.
      const names = [...(schema.required ?? [])];
      for (const name of Object.keys(schema.properties ?? {})) {
        if (names.length >= (schema.minProperties ?? 0)) break;
        if (!names.includes(name)) names.push(name);
      }
      return Object.fromEntries(names.map((name) => [name, minimalValue(schema.properties?.[name] ?? {})]));
    }
    default:
      return 'a';
  }
}

/** A copy of `root` with `value` at `path`, making the objects and arrays on the way. */
function setAt(root: unknown, path: Path, value: unknown): unknown {
  if (path.length === 0) return value;
  const [head, ...rest] = path;
  const container = (
    typeof head === 'number' ? [...(Array.isArray(root) ? (root as unknown[]) : [])] : { ...(root && typeof root === 'object' ? root : {}) }
  ) as Record<string | number, unknown>;
  container[head] = setAt(container[head], rest, value);
  return container;
}

function getAt(root: unknown, path: Path): unknown {
  return path.reduce<unknown>((v, k) => (v && typeof v === 'object' ? (v as Record<string | number, unknown>)[k] : undefined), root);
}

const fieldName = (part: string, path: Path) => [part, ...path.map(String)].join('.');
const show = (v: unknown) => (typeof v === 'string' ? (v.length > 12 ? `"${v.slice(0, 4)}…"(${v.length})` : JSON.stringify(v)) : JSON.stringify(v));

/** The mutations of one body slot, with what each must get. */
function bodyMutations(slot: Slot, maxStringChars: number): Array<{ value: unknown; key?: string; expect: Expectation }> {
  const field = fieldName('body', slot.path);
  const named: Expectation = { kind: 'names', field };
  if (slot.kind === 'key') {
    return [
      { key: LONE_SURROGATE, value: 'v', expect: named },
      { key: NUL, value: 'v', expect: named },
      { key: 'k'.repeat((slot.maxLength ?? maxStringChars) + 1), value: 'v', expect: { kind: '4xx' } },
    ];
  }
  const overlong = 'x'.repeat((slot.maxLength ?? maxStringChars) + 1);
  const free = slot.kind === 'free';
  return [
    { value: LONE_SURROGATE, expect: named },
    { value: NUL, expect: named },
    { value: `before${NUL}after`, expect: named },
    ...(slot.kind === 'typed' ? [{ value: 'banana', expect: named }] : [{ value: overlong, expect: { kind: '4xx' } as const }]),
    ...(slot.kind === 'typed' ? [] : WRONG_TYPES.map((value) => ({ value, expect: free ? ({ kind: 'no_5xx' } as const) : named }))),
  ];
}

/** Every case for every route of the catalogue. */
export function fuzzCases(routes: CatalogueRoute[], f: FuzzFixtures): FuzzCase[] {
  const cases: FuzzCase[] = [];
  for (const route of routes) {
    const label = `${route.method} ${route.path}`;
    const destructive = route.method === 'DELETE' || route.path.endsWith('/cancel');
    const auth = route.path.startsWith('/v1/admin') ? f.adminToken : route.path.startsWith('/v1/') ? f.tenantKey : undefined;
    const params: Record<string, string> = {};
    for (const [name, kind] of Object.entries(route.ids)) {
      const id = f.ids[kind];
      if (!id) throw new Error(`${label}: no fixture id for a ${kind}; add one to the fuzz test's fixtures`);
      params[name] = id;
    }
    for (const [name, schema] of Object.entries(route.params)) params[name] = String(minimalValue(jsonSchemaOf(schema)));
    const bodySchema = route.body ? jsonSchemaOf(route.body.schema) : undefined;
    const baseBody = bodySchema ? minimalValue(bodySchema) : undefined;
    const baseQuery = route.query ? (minimalValue(jsonSchemaOf(route.query)) as Record<string, unknown>) : {};

    const build = (options: { params?: Record<string, string>; query?: string; body?: unknown; headers?: Record<string, string> }) => {
      const p = { ...params, ...options.params };
      const path = route.path.replace(/:(\w+)/g, (_, name: string) => p[name]);
      const query = options.query ?? queryString(baseQuery);
      const headers: Record<string, string> = { ...(auth ? { authorization: `Bearer ${auth}` } : {}), ...options.headers };
      const body = options.body === undefined ? (baseBody === undefined ? undefined : JSON.stringify(baseBody)) : JSON.stringify(options.body);
      if (body !== undefined) headers['content-type'] = 'application/json';
      return { method: route.method, path: query ? `${path}?${query}` : path, headers, body, route: label, destructive };
    };

    if (bodySchema) {
      for (const slot of slotsOf(bodySchema)) {
        for (const m of bodyMutations(slot, f.maxStringChars)) {
          const body =
            slot.kind === 'key' ? setAt(baseBody, slot.path, { ...((getAt(baseBody, slot.path) as object) ?? {}), [m.key!]: m.value }) : setAt(baseBody, slot.path, m.value);
          const where = slot.kind === 'key' ? `key of ${fieldName('body', slot.path)} ← ${show(m.key)}` : `${fieldName('body', slot.path)} ← ${show(m.value)}`;
          cases.push({ ...build({ body }), label: where, expect: m.expect });
        }
      }
    }

    // Query strings: every declared parameter, and an undeclared one, which every route refuses.
    const querySchema = route.query ? jsonSchemaOf(route.query) : undefined;
    for (const [name, property] of Object.entries(querySchema?.properties ?? {})) {
      const field = `query.${name}`;
      const rest = queryString(Object.fromEntries(Object.entries(baseQuery).filter(([k]) => k !== name)));
      const q = (value: string) => [rest, `${encodeURIComponent(name)}=${value}`].filter(Boolean).join('&');
      const overlong = 'x'.repeat((property.maxLength ?? 3000) + 1);
      const mutations: Array<[string, string, Expectation]> = [
        ['%00', 'NUL', { kind: 'names', field }],
        [`a%00b`, 'embedded NUL', { kind: 'names', field }],
        // A surrogate's UTF-8 bytes do not decode: the query parser turns them into U+FFFD.
        ['%ED%A0%80', 'a surrogate’s bytes', { kind: 'no_5xx' }],
        [overlong, `overlong (${overlong.length})`, property.type === 'string' && property.maxLength === undefined ? { kind: 'no_5xx' } : { kind: '4xx' }],
        [`a&${encodeURIComponent(name)}=b`, 'repeated (an array)', { kind: 'names', field }],
      ];
      for (const [value, what, expect] of mutations) cases.push({ ...build({ query: q(value) }), label: `${field} ← ${what}`, expect });
    }
    cases.push({ ...build({ query: 'unknown=%00' }), label: 'query.unknown ← NUL', expect: { kind: 'names', field: 'query.unknown' } });
    cases.push({ ...build({ query: '%00=1' }), label: 'query key ← NUL', expect: { kind: 'names', field: 'query' } });

    // Path parameters: ids answer 404 without echoing; other parameters fail their schema.
    for (const name of Object.keys(route.ids)) {
      for (const [sent, what] of [
        ['%00', 'NUL'],
        ['%FF', 'an undecodable byte'],
        ['%ED%A0%80', 'a surrogate’s bytes'],
        ['x'.repeat(3000), 'overlong'],
      ]) {
        cases.push({ ...build({ params: { [name]: sent } }), label: `path :${name} ← ${what}`, expect: { kind: 'not_found', sent } });
      }
    }
    for (const name of Object.keys(route.params)) {
      for (const [sent, what] of [
        ['%00', 'NUL'],
        ['%FF', 'an undecodable byte'],
        ['%ED%A0%80', 'a surrogate’s bytes'],
        ['x'.repeat(3000), 'overlong'],
      ]) {
        cases.push({ ...build({ params: { [name]: sent } }), label: `path :${name} ← ${what}`, expect: { kind: '4xx' } });
      }
    }

    // Headers: fetch cannot send NUL or a lone surrogate in one, so overlong and malformed values.
    for (const name of Object.keys(route.headers)) {
      for (const [sent, what] of [
        ['x'.repeat(3000), 'overlong'],
        ['has space', 'with a space'],
        ['é', 'not ASCII'],
      ]) {
        cases.push({ ...build({ headers: { [name]: sent } }), label: `header.${name} ← ${what}`, expect: { kind: 'names', field: `header.${name}` } });
      }
    }
  }
  // Cases that would change or remove a fixture if wrongly accepted come after all the others.
  return [...cases.filter((c) => !c.destructive), ...cases.filter((c) => c.destructive)];
}

/** Why an answer breaks its case's expectation, or undefined when it keeps it. */
export function violation(c: FuzzCase, status: number, text: string, json: boolean): string | undefined {
  if (status >= 500) return `${status}`;
  let error: { code?: unknown; message?: unknown } | undefined;
  try {
    error = (JSON.parse(text) as { error?: { code?: unknown; message?: unknown } }).error;
  } catch {
    error = undefined;
  }
  if (status >= 400 && (!json || typeof error?.code !== 'string' || typeof error.message !== 'string')) return `${status} without a JSON error`;
  switch (c.expect.kind) {
    case 'names':
      if (status !== 400) return `${status}, not 400 naming ${c.expect.field}`;
      return String(error?.message).startsWith(`${c.expect.field}:`) || String(error?.message).includes(`${c.expect.field}:`) ? undefined : `400 not naming ${c.expect.field}: ${String(error?.message).slice(0, 200)}`;
    case 'not_found':
      if (status !== 404) return `${status}, not 404`;
      return text.includes(c.expect.sent) || text.includes(decodeURIComponentSafely(c.expect.sent)) ? 'the 404 echoes the id' : undefined;
    case '4xx':
      return status >= 400 && status < 500 ? undefined : `${status}, not a 4xx`;
    case 'no_5xx':
      return undefined;
  }
}

function queryString(values: Record<string, unknown>): string {
  return new URLSearchParams(Object.entries(values).map(([k, v]): [string, string] => [k, String(v)])).toString();
}

function decodeURIComponentSafely(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
