import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { LOGGER } from '@app/logging';
import type { Logger } from 'pino';
import { TENANT_TOOL_SOURCES, TenantTool, TenantToolListing, TenantToolProblem, TenantToolScope, TenantToolSource } from './tenant-tool';
import { ToolRegistry } from './tool-registry';

/** How long one source may take to list its tools before the run goes on without them. */
export const TENANT_TOOL_LIST_TIMEOUT_MS = 15_000;

/** The tenant's tools from every source, keyed by the name the model calls them by. */
export interface TenantToolSet {
  tools: ReadonlyMap<string, TenantTool>;
  problems: TenantToolProblem[];
}

export const NO_TENANT_TOOLS: TenantToolSet = { tools: new Map(), problems: [] };

/**
 * The tenant's stored configuration of every source, read (or being read) for a listing to
 * come: TenantTools.read. Opaque outside TenantTools.
 */
export interface StoredTenantTools {
  readonly tenantId: string;
  readonly reads: ReadonlyArray<Promise<unknown>>;
}

/**
 * Gathers the tools tenants added (TenantToolSource contributions, collected once every
 * provider is built, like GatewayToolCollector does for built-in tools). A source that
 * throws or takes too long is a problem, never a failed run; a tenant tool whose name
 * a built-in tool or an earlier source already has is skipped with a problem, so nobody
 * can shadow `terminal` or another tenant-visible name.
 */
@Injectable()
export class TenantTools implements OnModuleInit {
  private sources: TenantToolSource[] = [];

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly registry: ToolRegistry,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  onModuleInit(): void {
    for (const wrapper of this.discovery.getProviders()) {
      if (wrapper.token === TENANT_TOOL_SOURCES) this.sources.push(...(wrapper.instance as TenantToolSource[]));
    }
  }

  /** For tests and wiring that build sources by hand. */
  addSource(source: TenantToolSource): void {
    this.sources.push(source);
  }

  /**
   * Starts reading the tenant's stored configuration of every source, for `list` to make
   * the tools from later: a new run reads it beside its creation, rather than after its
   * commit. Only the tenant's own rows are read; nothing remote is asked and no session is
   * needed, so a read whose listing never comes (the creation was refused) costs the reads
   * alone. A failed read is that source's problem in the listing.
   */
  read(tenantId: string): StoredTenantTools {
    const reads = this.sources.map((source) => {
      // A source that throws rather than rejecting fails its listing too, not the caller.
      const read = (async () => source.read(tenantId))();
      // Awaited only by the listing, if one comes.
      read.catch(() => undefined);
      return read;
    });
    return { tenantId, reads };
  }

  /** The tenant's tools, from `stored` when it was read for this tenant, else read now. */
  async list(tenantId: string, scope: TenantToolScope = {}, stored?: StoredTenantTools): Promise<TenantToolSet> {
    if (this.sources.length === 0) return NO_TENANT_TOOLS;
    const { reads } = stored?.tenantId === tenantId && stored.reads.length === this.sources.length ? stored : this.read(tenantId);
    const listings = await Promise.all(this.sources.map((source, i) => this.listOne(source, i, tenantId, reads[i], scope)));
    const tools = new Map<string, TenantTool>();
    const problems: TenantToolProblem[] = [];
    for (const listing of listings) {
      problems.push(...listing.problems);
      for (const tool of listing.tools) {
        const name = tool.definition.name;
        if (this.registry.get(name) || tools.has(name)) {
          problems.push({
            key: `name_taken:${name}`,
            event: { type: 'tool.source_skipped', data: { name, origin: tool.origin, reason: `the name ${name} is already taken by another tool` } },
          });
          continue;
        }
        tools.set(name, tool);
      }
    }
    return { tools, problems };
  }

  /** One tenant tool by name (for direct calls, which have no run to hold the listing). */
  async find(tenantId: string, name: string, scope: TenantToolScope = {}): Promise<TenantTool | undefined> {
    return (await this.list(tenantId, scope)).tools.get(name);
  }

  private async listOne(source: TenantToolSource, index: number, tenantId: string, read: Promise<unknown>, scope: TenantToolScope): Promise<TenantToolListing> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`listing took longer than ${TENANT_TOOL_LIST_TIMEOUT_MS / 1000} s`)), TENANT_TOOL_LIST_TIMEOUT_MS);
    });
    try {
      return await Promise.race([read.then((stored) => source.list(tenantId, stored, scope)), timeout]);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      this.logger.warn({ tenantId, source: source.constructor.name, error: message }, 'a tenant tool source failed to list its tools');
      return {
        tools: [],
        problems: [{ key: `source:${index}`, event: { type: 'tool.source_failed', data: { source: source.constructor.name, error: message } } }],
      };
    } finally {
      clearTimeout(timer);
    }
  }
}
