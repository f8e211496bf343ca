import { Provider, Type } from '@nestjs/common';
import { RunEventType } from '@app/contracts';
import { GatewayTool } from './gateway-tool';

/**
 * A tool one tenant added to Runbox (an MCP server's tool, an OpenAPI service's operation),
 * as opposed to the deployment's built-in catalogue. It runs in the gateway like any
 * gateway tool; what differs is that only its tenant sees it, that its JSON Schema is the
 * one its source declared, and that a run admits it by its own name or by its source's
 * group name (`mcp__github` admits every tool of the tenant's server `github`).
 *
 * `definition.parameters` only has to accept a JSON object: the source validates the
 * arguments against `inputSchema` (or leaves it to the remote server) when it executes.
 */
export interface TenantTool extends GatewayTool {
  /** The JSON Schema the model is offered, as the source declared it (bounded by the source). */
  readonly inputSchema: Record<string, unknown>;
  /** Names besides its own that admit it in a run's `tools`, `enabled` and `disabled`. */
  readonly groups: readonly string[];
  /** Where it comes from (`mcp:<server>`, `openapi:<service>`), shown in GET /v1/tools. */
  readonly origin: string;
}

/**
 * A source that could not give its tools (a server that failed to connect, list or answer):
 * it is reported on the run as `event` (once per run and `key`) and skipped; the run goes on
 * with every other tool.
 */
export interface TenantToolProblem {
  /** Identifies the problem within a run, so a run reports it once, not at every turn. */
  key: string;
  event: { type: RunEventType; data: Record<string, unknown> };
}

export interface TenantToolListing {
  tools: TenantTool[];
  problems: TenantToolProblem[];
}

/** What a listing is for: the session matters to sources that run inside the sandbox (stdio MCP). */
export interface TenantToolScope {
  sessionId?: string;
  signal?: AbortSignal;
}

/**
 * A kind of tenant-added tool (MCP servers, OpenAPI services), listed in two steps: `read`
 * the tenant's stored configuration of the source (one tenant-scoped read, nothing remote,
 * no session), then `list` the tools from it. A new run reads beside its own creation and
 * lists once it is created (TenantTools.read). Listing happens before each model turn of a
 * run, so a source answers from what it holds (caching, parking failing servers) and never
 * throws because one of its servers failed: that is a problem in the listing. Both steps
 * are bounded in time by the caller too (TenantTools).
 */
export interface TenantToolSource<Stored = unknown> {
  read(tenantId: string): Promise<Stored>;
  list(tenantId: string, stored: Stored, scope: TenantToolScope): Promise<TenantToolListing>;
}

/** Nest token under which feature modules contribute their TenantToolSource. */
export const TENANT_TOOL_SOURCES = Symbol('TENANT_TOOL_SOURCES');

/** A feature module's tool source and its TENANT_TOOL_SOURCES contribution, for its `providers`. */
export function tenantToolSourceProviders(source: Type<TenantToolSource>): Provider[] {
  return [source, { provide: TENANT_TOOL_SOURCES, inject: [source], useFactory: (instance: TenantToolSource) => [instance] }];
}
