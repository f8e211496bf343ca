import { parse as parseYaml } from 'yaml';

/**
 * An OpenAPI 3.x document reduced to what Runbox needs to offer its operations as tools and
 * call them: the first server, and per operation its method, path, parameters and JSON
 * request body schema, with every local `$ref` resolved. This is what is stored; the
 * original document is not kept.
 */
export interface OpenApiServiceDocument {
  title: string;
  /** The first server's URL as absolute http(s), variables filled with their defaults, no trailing slash. */
  baseUrl: string;
  operations: OpenApiOperation[];
}

export type HttpMethod = (typeof HTTP_METHODS)[number];

export interface OpenApiOperation {
  operationId: string;
  method: HttpMethod;
  /** The path template as declared (`/pets/{petId}`). */
  path: string;
  summary?: string;
  description?: string;
  parameters: OpenApiParameter[];
  body?: { required: boolean; description?: string; schema: JsonSchema };
}

export interface OpenApiParameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required: boolean;
  description?: string;
  schema: JsonSchema;
  /** The tool argument that carries it: its name, unless that collides or is not a safe property name. */
  argument: string;
}

export type JsonSchema = Record<string, unknown>;

/** An operation of the document that is not offered, and why. */
export interface SkippedOperation {
  operation: string;
  reason: string;
}

/** A document (or the `operations` chosen from it) Runbox cannot use; the message says why. */
export class OpenApiDocumentError extends Error {}

export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

/** The most operations one service offers: each is a tool the model reads about at every turn. */
export const MAX_OPERATIONS = 64;
/** Nested `$ref`s followed before the document is refused. */
export const MAX_REF_DEPTH = 32;
/** JSON values in the resolved operations: `$ref`s can multiply a small document. */
export const MAX_RESOLVED_NODES = 200_000;
/** Characters of a summary or description kept. */
export const MAX_DESCRIPTION_CHARS = 1024;

/** Headers a parameter may not set: OpenAPI ignores the first three; the rest belong to the transport. */
const RESERVED_HEADERS = new Set(['accept', 'content-type', 'authorization', 'host', 'content-length', 'connection', 'transfer-encoding', 'cookie', 'te', 'upgrade', 'keep-alive', 'proxy-authorization', 'trailer']);
const HEADER_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const SAFE_ARGUMENT = /^[a-zA-Z0-9_.-]{1,64}$/;
const JSON_MEDIA_TYPE = /^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/i;

/** A document's text: JSON, or YAML (a superset of JSON) with aliases bounded. */
export function parseSpecText(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    // not JSON: YAML below
  }
  try {
    // Aliases can expand a small text into a huge tree; OpenAPI documents rarely use them.
    return parseYaml(text, { maxAliasCount: 100, prettyErrors: false });
  } catch (err) {
    throw new OpenApiDocumentError(`not JSON or YAML: ${(err instanceof Error ? err.message : String(err)).split('\n')[0].slice(0, 200)}`);
  }
}

/**
 * Reads an OpenAPI 3.x document into the stored subset. `specUrl` is where it came from
 * (relative server URLs resolve against it); `chosen` names the operations to offer (all
 * when omitted). Throws OpenApiDocumentError naming what is wrong.
 */
export function readOpenApiDocument(raw: unknown, options: { specUrl?: string; chosen?: string[] } = {}): { document: OpenApiServiceDocument; skipped: SkippedOperation[] } {
  if (!isObject(raw)) throw new OpenApiDocumentError('an OpenAPI document is a JSON object');
  if (typeof raw.openapi !== 'string' || !/^3\.\d+(\.\d+)?/.test(raw.openapi)) {
    throw new OpenApiDocumentError(typeof raw.swagger === 'string' ? 'Swagger 2.0 documents are not supported; convert it to OpenAPI 3' : 'the "openapi" field must name version 3.x');
  }
  if (!isObject(raw.paths)) throw new OpenApiDocumentError('the document has no "paths" object');
  const resolver = new RefResolver(raw);
  const baseUrl = serverUrl(raw.servers, options.specUrl);
  const info = isObject(raw.info) ? raw.info : {};
  const title = typeof info.title === 'string' ? info.title.slice(0, 200) : '';

  const found = new Map<string, OpenApiOperation | SkippedOperation>();
  const skipped: SkippedOperation[] = [];
  for (const [path, rawItem] of Object.entries(raw.paths)) {
    const item = resolver.resolve(rawItem, `paths.${path}`);
    if (!isObject(item)) continue;
    for (const method of HTTP_METHODS) {
      const op = item[method];
      if (!isObject(op)) continue;
      const where = `${method.toUpperCase()} ${path}`;
      if (typeof op.operationId !== 'string' || !op.operationId) {
        skipped.push({ operation: where, reason: 'it has no operationId' });
        continue;
      }
      if (found.has(op.operationId)) throw new OpenApiDocumentError(`operationId "${op.operationId.slice(0, 100)}" is used twice`);
      found.set(op.operationId, readOperation(resolver, path, method, op, item.parameters));
    }
  }

  const wanted = options.chosen ?? [...found.keys()];
  const unknown = wanted.filter((id) => !found.has(id));
  if (unknown.length) {
    const known = [...found.keys()].slice(0, 30).join(', ');
    throw new OpenApiDocumentError(`operations: ${unknown.slice(0, 10).map((id) => `"${id}"`).join(', ')} not in the document (it has: ${known || 'no operationIds'})`);
  }
  const operations: OpenApiOperation[] = [];
  for (const id of wanted) {
    const entry = found.get(id)!;
    if ('reason' in entry) {
      if (options.chosen) throw new OpenApiDocumentError(`operations: "${id}" cannot be offered: ${entry.reason}`);
      skipped.push(entry);
    } else operations.push(entry);
  }
  if (operations.length > MAX_OPERATIONS) {
    throw new OpenApiDocumentError(`the document has ${operations.length} usable operations; at most ${MAX_OPERATIONS} can be offered, so name the ones you want in "operations"`);
  }
  if (operations.length === 0) throw new OpenApiDocumentError(`the document has no operation that can be offered${skipped.length ? ` (${skipped.slice(0, 5).map((s) => `${s.operation}: ${s.reason}`).join('; ')})` : ''}`);
  return { document: { title, baseUrl, operations }, skipped };
}

function readOperation(resolver: RefResolver, path: string, method: HttpMethod, op: Record<string, unknown>, shared: unknown): OpenApiOperation | SkippedOperation {
  const operationId = op.operationId as string;
  const skip = (reason: string): SkippedOperation => ({ operation: operationId, reason });
  if (!path.startsWith('/')) return skip(`its path "${path.slice(0, 100)}" does not start with /`);

  // Path-level parameters apply to every operation; the operation's own replace them by name and place.
  const declared = new Map<string, Record<string, unknown>>();
  for (const list of [shared, op.parameters]) {
    if (list === undefined) continue;
    if (!Array.isArray(list)) return skip('its "parameters" is not a list');
    for (const [i, p] of list.entries()) {
      const param = resolver.resolve(p, `${operationId}.parameters.${i}`);
      if (!isObject(param) || typeof param.name !== 'string' || typeof param.in !== 'string') return skip(`parameter ${i} has no name or "in"`);
      declared.set(`${param.in}:${param.name}`, param);
    }
  }

  const parameters: OpenApiParameter[] = [];
  const taken = new Set(['body']);
  for (const param of declared.values()) {
    const name = param.name as string;
    const place = param.in as string;
    const required = place === 'path' || param.required === true;
    if (place === 'cookie') {
      if (required) return skip(`it needs the cookie parameter "${name}", which Runbox does not send`);
      continue;
    }
    if (place !== 'path' && place !== 'query' && place !== 'header') return skip(`parameter "${name}" has an unknown "in": ${place.slice(0, 20)}`);
    if (place === 'header' && (RESERVED_HEADERS.has(name.toLowerCase()) || !HEADER_TOKEN.test(name))) {
      if (required && !RESERVED_HEADERS.has(name.toLowerCase())) return skip(`its header parameter "${name.slice(0, 100)}" is not a valid header name`);
      continue;
    }
    const schema = parameterSchema(param);
    parameters.push({
      name,
      in: place,
      required,
      ...(typeof param.description === 'string' ? { description: bounded(param.description) } : {}),
      schema,
      argument: argumentName(name, place, taken),
    });
  }
  for (const match of path.matchAll(/\{([^}]*)\}/g)) {
    if (!parameters.some((p) => p.in === 'path' && p.name === match[1])) return skip(`its path parameter {${match[1]}} is not declared`);
  }

  const operation: OpenApiOperation = { operationId, method, path, parameters };
  if (typeof op.summary === 'string' && op.summary.trim()) operation.summary = bounded(op.summary);
  if (typeof op.description === 'string' && op.description.trim()) operation.description = bounded(op.description);
  if (op.requestBody !== undefined) {
    const requestBody = resolver.resolve(op.requestBody, `${operationId}.requestBody`);
    if (isObject(requestBody)) {
      const content = isObject(requestBody.content) ? requestBody.content : {};
      const jsonType = Object.keys(content).find((type) => JSON_MEDIA_TYPE.test(type));
      const required = requestBody.required === true;
      if (jsonType) {
        const media = content[jsonType];
        const schema = isObject(media) && isObject(media.schema) ? (media.schema as JsonSchema) : {};
        operation.body = { required, schema, ...(typeof requestBody.description === 'string' ? { description: bounded(requestBody.description) } : {}) };
      } else if (required) {
        return skip(`its request body is ${Object.keys(content).slice(0, 3).join(', ') || 'of no declared type'}, and only JSON bodies are sent`);
      }
    }
  }
  return operation;
}

/** A parameter's schema (or its `content`'s, for the rare complex one), with its description. */
function parameterSchema(param: Record<string, unknown>): JsonSchema {
  if (isObject(param.schema)) return param.schema;
  if (isObject(param.content)) {
    const first = Object.values(param.content)[0];
    if (isObject(first) && isObject(first.schema)) return first.schema;
  }
  return { type: 'string' };
}

function argumentName(name: string, place: string, taken: Set<string>): string {
  let candidate = SAFE_ARGUMENT.test(name) && !taken.has(name) ? name : `${place}_${name.replace(/[^a-zA-Z0-9_.-]/g, '_')}`.slice(0, 60);
  for (let i = 2; taken.has(candidate); i++) candidate = `${candidate.slice(0, 58)}_${i}`;
  taken.add(candidate);
  return candidate;
}

/**
 * The first server's URL, made absolute: OpenAPI's default server is `/`, and a relative URL
 * is relative to where the document was served from, so an inline document needs an
 * absolute one.
 */
function serverUrl(servers: unknown, specUrl: string | undefined): string {
  let template = '/';
  let variables: Record<string, unknown> = {};
  if (servers !== undefined) {
    if (!Array.isArray(servers)) throw new OpenApiDocumentError('"servers" must be a list');
    const first: unknown = servers[0];
    if (first !== undefined) {
      if (!isObject(first) || typeof first.url !== 'string') throw new OpenApiDocumentError('servers[0] has no "url"');
      template = first.url;
      variables = isObject(first.variables) ? first.variables : {};
    }
  }
  const filled = template.replace(/\{([^}]*)\}/g, (_, name: string) => {
    const variable = Object.hasOwn(variables, name) ? variables[name] : undefined;
    if (!isObject(variable) || typeof variable.default !== 'string') throw new OpenApiDocumentError(`servers[0].url uses {${name}}, which has no default in servers[0].variables`);
    return variable.default;
  });
  let url: URL;
  try {
    url = specUrl ? new URL(filled, specUrl) : new URL(filled);
  } catch {
    throw new OpenApiDocumentError(
      specUrl ? `servers[0].url "${filled.slice(0, 200)}" is not a URL` : `servers[0].url "${filled.slice(0, 200)}" is not an absolute URL (an inline document has no address to resolve it against)`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new OpenApiDocumentError(`servers[0].url must be http or https, not ${url.protocol}`);
  if (url.username || url.password) throw new OpenApiDocumentError('servers[0].url may not carry a user name or password; use "auth"');
  if (url.search || url.hash) throw new OpenApiDocumentError('servers[0].url may not have a query or a fragment');
  return url.toString().replace(/\/+$/, '');
}

/**
 * Resolves local `$ref`s (`#/components/...`) by copying what they point at, so the stored
 * operations stand alone. Remote references are refused (they would be fetches Runbox did
 * not guard); a reference that leads back into itself (a recursive schema) becomes an empty
 * schema at that point, and the copies together are bounded (MAX_RESOLVED_NODES).
 */
class RefResolver {
  private nodes = 0;

  constructor(private readonly root: Record<string, unknown>) {}

  resolve(value: unknown, where: string, depth = 0, chain: readonly string[] = []): unknown {
    if (++this.nodes > MAX_RESOLVED_NODES) throw new OpenApiDocumentError(`resolving the $refs makes the document larger than ${MAX_RESOLVED_NODES} values`);
    if (Array.isArray(value)) return value.map((v) => this.resolve(v, where, depth, chain));
    if (!isObject(value)) return value;
    if (typeof value.$ref === 'string') {
      const ref = value.$ref;
      if (!ref.startsWith('#')) throw new OpenApiDocumentError(`${where}: the $ref "${ref.slice(0, 200)}" points outside the document; only local references (#/...) are followed`);
      if (chain.includes(ref)) return { description: `recursive: ${ref.slice(0, 200)}` };
      if (depth >= MAX_REF_DEPTH) throw new OpenApiDocumentError(`${where}: $refs nest deeper than ${MAX_REF_DEPTH}`);
      return this.resolve(this.target(ref, where), where, depth + 1, [...chain, ref]);
    }
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(value)) {
      // Assigning `__proto__` would set the copy's prototype instead of a property.
      if (key === '__proto__') continue;
      out[key] = this.resolve(v, where, depth, chain);
    }
    return out;
  }

  private target(ref: string, where: string): unknown {
    let node: unknown = this.root;
    for (const raw of ref.slice(1).split('/').slice(1)) {
      let key: string;
      try {
        key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
      } catch {
        key = raw;
      }
      const container = node;
      node = Array.isArray(container) ? container[Number(key)] : isObject(container) && Object.hasOwn(container, key) ? container[key] : undefined;
      if (node === undefined) throw new OpenApiDocumentError(`${where}: the $ref "${ref.slice(0, 200)}" points at nothing in the document`);
    }
    return node;
  }
}

function bounded(text: string): string {
  const trimmed = text.trim();
  return trimmed.length > MAX_DESCRIPTION_CHARS ? `${trimmed.slice(0, MAX_DESCRIPTION_CHARS - 1)}…` : trimmed;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
