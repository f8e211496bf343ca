import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { EgressGuard, EgressTarget, guardedFetch, GuardedFetchOptions, GuardedResponse } from '@app/egress';
import { EgressRulesRepository } from './egress-rules.repository';

/** `Runbox/<version>`: how Runbox names itself to the servers its tools reach. */
export const USER_AGENT = `Runbox/${runboxVersion()}`;

/** The version in Runbox's package.json, found upwards from here (source and build alike). */
function runboxVersion(): string {
  for (let dir = __dirname; dir !== dirname(dir); dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (!existsSync(file)) continue;
    const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
    if (pkg.name === 'runbox' && pkg.version) return pkg.version;
  }
  return 'dev';
}

/**
 * The gateway's way out to the network for a tenant: the deployment's egress guard
 * (RUNBOX_ALLOW_PRIVATE_HOSTS) with the tenant's own domain rules, read for every call so
 * an admin's change applies to the next request.
 */
@Injectable()
export class Outbound {
  readonly guard: EgressGuard;

  constructor(
    @Inject(RUNBOX_CONFIG) config: RunboxConfig,
    private readonly rules: EgressRulesRepository,
  ) {
    this.guard = new EgressGuard({ allowPrivateHosts: config.RUNBOX_ALLOW_PRIVATE_HOSTS ?? [] });
  }

  async fetch(tenantId: string, url: string, options: Omit<GuardedFetchOptions, 'rules'>): Promise<GuardedResponse> {
    const rules = await this.rules.forTenant(tenantId);
    return guardedFetch(this.guard, url, { ...options, rules, headers: { 'user-agent': USER_AGENT, ...options.headers } });
  }

  /** For non-HTTP tools (SSH, databases): the one address the caller may connect to. */
  async checkHost(tenantId: string, host: string, port: number): Promise<EgressTarget> {
    return this.guard.checkHost(host, port, await this.rules.forTenant(tenantId));
  }
}
