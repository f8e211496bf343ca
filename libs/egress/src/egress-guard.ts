import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { addressBytes, AddressClass, classifyAddress } from './address-class';
import { DomainRules, matchDomainRules } from './domain-rules';

/** Resolves a host name to every address it has (the guard checks them all). */
export type Resolver = (hostname: string) => Promise<Array<{ address: string; family: number }>>;

/** The system resolver (getaddrinfo: /etc/hosts, then DNS), every address of the name. */
export const systemResolver: Resolver = (hostname) => lookup(hostname, { all: true, verbatim: true });

/** Where a connection may go: connect to `address` (never resolve `hostname` again). */
export interface EgressTarget {
  /** The host as written in the URL or given by the caller, lower-cased, without brackets. */
  hostname: string;
  port: number;
  /** The checked address; the only one the caller may connect to. */
  address: string;
  family: 4 | 6;
}

export type EgressRefusal =
  | 'invalid_url'
  | 'scheme_not_allowed'
  | 'address_not_allowed'
  | 'domain_denied'
  | 'domain_not_allowed'
  | 'dns_failed';

/** A destination the guard refused; `message` says which rule and is safe to show the model. */
export class EgressRefusedError extends Error {
  constructor(
    readonly code: EgressRefusal,
    message: string,
    readonly addressClass?: AddressClass,
  ) {
    super(message);
  }
}

export interface EgressGuardOptions {
  /**
   * `host:port` entries an operator allows although they are private (RUNBOX_ALLOW_PRIVATE_HOSTS):
   * `host` is compared with the destination's host name and with its resolved address;
   * `port` may be `*`. IPv6 hosts in brackets: `[::1]:8080`.
   */
  allowPrivateHosts?: string[];
  resolver?: Resolver;
}

const DNS_TIMEOUT_MS = 10_000;

/**
 * Decides whether an outbound connection may be made, after resolving the name: every
 * address the name resolves to must be public (or allowed by the operator), and the tenant's
 * domain rules must admit the host. The answer is the one address to connect to, so the
 * check and the connection cannot see different DNS answers (no rebinding between them).
 *
 * Callers: `guardedFetch` (HTTP with redirects re-checked), the browser's request routing,
 * and any tool opening a socket (SSH, MCP, OpenAPI) through `checkHost`.
 */
export class EgressGuard {
  private readonly allowed: Array<{ host: string; port: number | '*' }>;
  private readonly resolver: Resolver;

  constructor(options: EgressGuardOptions = {}) {
    this.allowed = (options.allowPrivateHosts ?? []).map(parseHostPort);
    this.resolver = options.resolver ?? systemResolver;
  }

  /** Checks an http(s) URL; throws EgressRefusedError naming the rule that refused it. */
  async checkUrl(url: string | URL, rules: DomainRules): Promise<EgressTarget & { url: URL }> {
    let parsed: URL;
    try {
      parsed = typeof url === 'string' ? new URL(url) : url;
    } catch {
      throw new EgressRefusedError('invalid_url', `not a valid URL: ${String(url).slice(0, 200)}`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      throw new EgressRefusedError('scheme_not_allowed', `only http and https URLs can be fetched, not ${parsed.protocol}`);
    }
    // WHATWG URL parsing already turns 2130706433, 0177.0.0.1 and 0x7f.1 into 127.0.0.1.
    const port = parsed.port ? Number(parsed.port) : parsed.protocol === 'https:' ? 443 : 80;
    return { ...(await this.checkHost(parsed.hostname, port, rules)), url: parsed };
  }

  /** Checks a host and port for any protocol (SSH, a database, a raw socket). */
  async checkHost(host: string, port: number, rules: DomainRules): Promise<EgressTarget> {
    const hostname = normalizeHost(host);
    if (!hostname) throw new EgressRefusedError('invalid_url', 'no host given');
    const verdict = matchDomainRules(hostname, rules);
    if (verdict === 'denied') throw new EgressRefusedError('domain_denied', `${hostname} is on this tenant's egress deny list`);
    if (verdict === 'not_allowed') throw new EgressRefusedError('domain_not_allowed', `${hostname} is not on this tenant's egress allow list`);

    const addresses = await this.resolve(hostname);
    for (const { address } of addresses) {
      const kind = classifyAddress(address);
      if (kind === 'public' || this.operatorAllows(hostname, address, port)) continue;
      const shown = address === hostname ? address : `${hostname} (${address})`;
      throw new EgressRefusedError('address_not_allowed', `${shown}:${port} is a ${kind} address; outbound tools may only reach public addresses`, kind);
    }
    const { address, family } = addresses[0];
    return { hostname, port, address, family: family === 6 ? 6 : 4 };
  }

  private async resolve(hostname: string): Promise<Array<{ address: string; family: number }>> {
    const literal = isIP(hostname);
    if (literal) return [{ address: hostname, family: literal }];
    let answers: Array<{ address: string; family: number }>;
    try {
      answers = await withTimeout(this.resolver(hostname), DNS_TIMEOUT_MS);
    } catch (err) {
      throw new EgressRefusedError('dns_failed', `cannot resolve ${hostname}: ${(err as Error).message}`);
    }
    if (answers.length === 0) throw new EgressRefusedError('dns_failed', `${hostname} has no address`);
    return answers;
  }

  private operatorAllows(hostname: string, address: string, port: number): boolean {
    return this.allowed.some((a) => (a.port === '*' || a.port === port) && (a.host === hostname || sameAddress(a.host, address)));
  }
}

/** Lower case, brackets and a trailing dot removed: how hosts are compared everywhere here. */
export function normalizeHost(host: string): string {
  let h = host.trim().toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  return h.endsWith('.') ? h.slice(0, -1) : h;
}

function parseHostPort(entry: string): { host: string; port: number | '*' } {
  const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5}|\*)$/.exec(entry.trim());
  if (!m) throw new Error(`RUNBOX_ALLOW_PRIVATE_HOSTS: "${entry}" is not host:port (IPv6 as [addr]:port, port may be *)`);
  return { host: normalizeHost(m[1]), port: m[2] === '*' ? '*' : Number(m[2]) };
}

function sameAddress(a: string, b: string): boolean {
  const x = addressBytes(a);
  const y = addressBytes(b);
  return !!x && !!y && x.length === y.length && x.every((v, i) => v === y[i]);
}

async function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
