import { z, ZodType } from 'zod';

export type JsonSchema = Record<string, unknown>;

/**
 * A zod schema as an OpenAPI 3.1 Schema Object (JSON Schema 2020-12). Requests are
 * described by their input shape (what a client may send: defaults optional, coerced query
 * numbers as numbers), answers by their output shape. Definitions zod hoists (`$defs`) move
 * to the document's components, since a `#/...` reference inside an embedded schema resolves
 * against the document, not the schema: a schema named with `.meta({ id: 'Run' })` becomes
 * the shared component `Run`; one zod had to name itself (a recursive shape) is kept apart
 * under `prefix`.
 */
export function toOpenApiSchema(schema: ZodType, io: 'input' | 'output', components: Record<string, JsonSchema>, prefix: string): JsonSchema {
  const json = z.toJSONSchema(schema, { io, target: 'draft-2020-12', unrepresentable: 'any' }) as JsonSchema;
  delete json.$schema;
  const defs = (json.$defs ?? {}) as Record<string, JsonSchema>;
  delete json.$defs;
  const rename = (name: string) => (/^__schema\d+$/.test(name) ? `${prefix}_${name}` : name);
  for (const [name, def] of Object.entries(defs)) {
    const component = rewriteRefs(def, rename);
    const existing = components[rename(name)];
    if (existing && JSON.stringify(existing) !== JSON.stringify(component)) {
      throw new Error(`two different schemas are named ${name} (.meta({ id })), or one is used both as a request and an answer: give each its own id`);
    }
    components[rename(name)] = component;
  }
  return rewriteRefs(json, rename);
}

function rewriteRefs<T>(value: T, rename: (name: string) => string): T {
  if (Array.isArray(value)) return value.map((v: unknown) => rewriteRefs(v, rename)) as T;
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (key === '$ref' && typeof v === 'string') {
      if (v === '#') throw new Error('a self-referencing schema needs an id (.meta({ id })) to be placed in the API document');
      out[key] = v.replace(/^#\/\$defs\/(.+)$/, (_, name: string) => `#/components/schemas/${rename(name)}`);
    } else {
      out[key] = rewriteRefs(v, rename);
    }
  }
  return out as T;
}
