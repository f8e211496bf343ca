import { z } from 'zod';
import { providerToolName } from '../tools/provider-tool-name';
import { JsonSchema, OpenApiOperation } from './openapi-document';

/** How long one call may take unless the run's `limits.timeouts` says otherwise. */
export const OPERATION_TIMEOUT_SECONDS = 60;

/** What the model is offered for one operation of a service. */
export interface OperationToolShape {
  name: string;
  description: string;
  inputSchema: JsonSchema;
  /** GET and HEAD only read; every other method may change something, so approval rules apply. */
  mutating: boolean;
  /** Accepts an object with the required arguments and no unknown ones; the service checks the rest. */
  parameters: z.ZodType<Record<string, unknown>>;
}

/**
 * An operation as a tool: named `<service>__<operationId>` (made provider-safe), described by
 * its summary, taking its path, query and header parameters as arguments (required as the
 * document says) and its JSON request body as `body`.
 */
export function operationTool(service: string, op: OpenApiOperation): OperationToolShape {
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  for (const p of op.parameters) {
    const where = `${p.in} parameter ${p.name}`;
    const described = p.description ?? (typeof p.schema.description === 'string' ? p.schema.description : undefined);
    properties[p.argument] = { ...p.schema, description: described ? `${described} (${where})` : where };
    if (p.required) required.push(p.argument);
  }
  if (op.body) {
    properties.body = { ...op.body.schema, description: op.body.description ? `${op.body.description} (JSON request body)` : 'The JSON request body.' };
    if (op.body.required) required.push('body');
  }
  const inputSchema: JsonSchema = { type: 'object', properties, ...(required.length ? { required } : {}), additionalProperties: false };
  const known = new Set(Object.keys(properties));
  const parameters = z.record(z.string(), z.unknown()).superRefine((args, ctx) => {
    for (const name of required) if (args[name] === undefined) ctx.addIssue({ code: 'custom', path: [name], message: 'required' });
    for (const name of Object.keys(args)) if (!known.has(name)) ctx.addIssue({ code: 'custom', path: [name], message: `not a parameter of ${op.operationId}` });
  });
  const summary = op.summary ?? op.description ?? `${op.method.toUpperCase()} ${op.path}`;
  return {
    name: providerToolName(service, op.operationId),
    description: `${summary} (${op.method.toUpperCase()} ${op.path} on the OpenAPI service ${service})`,
    inputSchema,
    mutating: op.method !== 'get' && op.method !== 'head',
    parameters,
  };
}

export interface OperationRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
}

/** An argument that cannot be put where its parameter goes (an object in a path, a line break in a header). */
export class OperationArgumentError extends Error {}

/**
 * The HTTP request for a call: path parameters percent-encoded into the template (so a value
 * cannot climb out of it with `../` or `?`), query parameters appended (arrays repeated),
 * header parameters set, and `body` sent as JSON. The URL always starts with `baseUrl`.
 */
export function operationRequest(baseUrl: string, op: OpenApiOperation, args: Record<string, unknown>): OperationRequest {
  const byName = new Map(op.parameters.map((p) => [p.name, p]));
  const path = op.path.replace(/\{([^}]*)\}/g, (_, name: string) => {
    const param = byName.get(name)!;
    const value = scalar(args[param.argument], param.argument);
    // URLs resolve `.` and `..` segments (encoded or not): a value may not step out of the template.
    if (value === '.' || value === '..') throw new OperationArgumentError(`${param.argument}: "${value}" is not a path value`);
    return encodeURIComponent(value);
  });
  const url = new URL(`${baseUrl}${path}`);
  const headers: Record<string, string> = {};
  for (const p of op.parameters) {
    const value = args[p.argument];
    if (value === undefined || value === null) continue;
    if (p.in === 'query') {
      for (const item of Array.isArray(value) ? value : [value]) url.searchParams.append(p.name, scalar(item, p.argument));
    } else if (p.in === 'header') {
      const text = Array.isArray(value) ? value.map((v) => scalar(v, p.argument)).join(',') : scalar(value, p.argument);
      if (/[\r\n\0]/.test(text)) throw new OperationArgumentError(`${p.argument}: a header value may not contain line breaks`);
      headers[p.name] = text;
    }
  }
  const request: OperationRequest = { url: url.toString(), method: op.method.toUpperCase(), headers: { ...headers, accept: 'application/json, text/plain;q=0.9, */*;q=0.5' } };
  if (op.body && args.body !== undefined) {
    request.body = JSON.stringify(args.body);
    request.headers['content-type'] = 'application/json';
  }
  return request;
}

function scalar(value: unknown, argument: string): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  throw new OperationArgumentError(`${argument}: expected a string, number or boolean, got ${value === null ? 'null' : Array.isArray(value) ? 'a list' : typeof value}`);
}
