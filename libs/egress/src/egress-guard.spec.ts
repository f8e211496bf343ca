import net from 'node:net';
import { classifyAddress } from './address-class';
import { NO_DOMAIN_RULES, domainRulesSchema } from './domain-rules';
import { EgressGuard, EgressRefusedError, Resolver } from './egress-guard';
import { guardedFetch } from './guarded-fetch';

/** A resolver that answers from a table and records what it was asked. */
function stubResolver(table: Record<string, string[]>): Resolver & { asked: string[] } {
  const asked: string[] = [];
  const resolver = async (host: string) => {
    asked.push(host);
    const answers = table[host];
    if (!answers) throw new Error('ENOTFOUND');
    return answers.map((address) => ({ address, family: net.isIP(address) }));
  };
  return Object.assign(resolver, { asked });
}

describe('classifyAddress', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.0.0.2', 'loopback'],
    ['::1', 'loopback'],
    ['[::1]', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.16.5.4', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['fe80::1', 'link-local'],
    ['fd00::1', 'unique-local'],
    ['fc00::1', 'unique-local'],
    ['224.0.0.1', 'multicast'],
    ['ff02::1', 'multicast'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['255.255.255.255', 'reserved'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:169.254.169.254', 'link-local'],
    ['::ffff:a9fe:a9fe', 'link-local'],
    ['::127.0.0.1', 'loopback'],
    ['64:ff9b::10.0.0.1', 'private'],
    ['2002:7f00:1::', 'loopback'],
    ['fe80::1%eth0', 'link-local'],
    ['93.184.216.34', 'public'],
    ['2606:4700::1111', 'public'],
    ['8.8.8.8', 'public'],
    ['example.com', 'invalid'],
  ])('%s is %s', (address, expected) => {
    expect(classifyAddress(address)).toBe(expected);
  });
});

describe('EgressGuard', () => {
  let connect: jest.SpyInstance;

  beforeEach(() => {
    // Were the guard broken, nothing may leave this machine: any connection attempt fails here.
    connect = jest.spyOn(net.Socket.prototype, 'connect').mockImplementation(() => {
      throw new Error('a connection was attempted');
    });
  });
  afterEach(() => connect.mockRestore());

  const resolver = stubResolver({
    'intranet.example': ['10.0.0.1'],
    'metadata.example': ['169.254.169.254'],
    'ula.example': ['fd00::1'],
    'mixed.example': ['93.184.216.34', '10.0.0.1'],
    'public.example': ['93.184.216.34'],
    'docs.public.example': ['93.184.216.34'],
  });
  const guard = new EgressGuard({ resolver, allowPrivateHosts: ['127.0.0.1:8080', 'intranet.example:443'] });

  it.each([
    ['http://intranet.example/', 'private'],
    ['http://metadata.example/latest/meta-data/', 'link-local'],
    ['http://ula.example/', 'unique-local'],
    ['http://mixed.example/', 'private'],
    ['http://169.254.169.254/latest/meta-data/', 'link-local'],
    ['http://2130706433/', 'loopback'],
    ['http://0177.0.0.1/', 'loopback'],
    ['http://0x7f.1/', 'loopback'],
    ['http://127.0.0.2/', 'loopback'],
    ['http://[::1]/', 'loopback'],
    ['http://[::ffff:127.0.0.1]/', 'loopback'],
    ['http://127.0.0.1:5432/', 'loopback'],
    ['http://0.0.0.0/', 'unspecified'],
  ])('refuses %s after resolving it (%s) and connects nowhere', async (url, kind) => {
    const refusal = await guardedFetch(guard, url, { rules: NO_DOMAIN_RULES, timeoutMs: 5_000, maxBytes: 1_000, maxRedirects: 5 }).catch(
      (e: unknown) => e,
    );
    expect(refusal).toBeInstanceOf(EgressRefusedError);
    expect(refusal).toMatchObject({ code: 'address_not_allowed', addressClass: kind });
    expect(connect).not.toHaveBeenCalled();
  });

  it('answers with the checked address, so the caller never resolves the name again', async () => {
    resolver.asked.length = 0;
    const target = await guard.checkUrl('https://public.example/x', NO_DOMAIN_RULES);
    expect(target).toMatchObject({ hostname: 'public.example', port: 443, address: '93.184.216.34', family: 4 });
    expect(resolver.asked).toEqual(['public.example']);
  });

  it('lets an operator allow a named private host:port, by name or by resolved address', async () => {
    await expect(guard.checkUrl('http://127.0.0.1:8080/', NO_DOMAIN_RULES)).resolves.toMatchObject({ address: '127.0.0.1' });
    await expect(guard.checkUrl('https://intranet.example/', NO_DOMAIN_RULES)).resolves.toMatchObject({ address: '10.0.0.1' });
    await expect(guard.checkUrl('http://127.0.0.1:8081/', NO_DOMAIN_RULES)).rejects.toMatchObject({ code: 'address_not_allowed' });
    await expect(guard.checkUrl('http://intranet.example:80/', NO_DOMAIN_RULES)).rejects.toMatchObject({ code: 'address_not_allowed' });
  });

  it('applies a tenant deny list over its allow list, subdomains included', async () => {
    const rules = domainRulesSchema.parse({ allow: ['public.example'], deny: ['*.docs.public.example', 'docs.public.example'] });
    await expect(guard.checkUrl('http://public.example/', rules)).resolves.toBeDefined();
    await expect(guard.checkUrl('http://docs.public.example/', rules)).rejects.toMatchObject({ code: 'domain_denied' });
    await expect(guard.checkUrl('http://other.example/', rules)).rejects.toMatchObject({ code: 'domain_not_allowed' });
  });

  it('checks domain rules before resolving, so a denied name is never looked up', async () => {
    resolver.asked.length = 0;
    await expect(guard.checkUrl('http://public.example/', { allow: [], deny: ['example'] })).rejects.toMatchObject({ code: 'domain_denied' });
    expect(resolver.asked).toEqual([]);
  });

  it('refuses other schemes and unknown names', async () => {
    await expect(guard.checkUrl('file:///etc/passwd', NO_DOMAIN_RULES)).rejects.toMatchObject({ code: 'scheme_not_allowed' });
    await expect(guard.checkUrl('http://nowhere.example/', NO_DOMAIN_RULES)).rejects.toMatchObject({ code: 'dns_failed' });
  });

  it('rejects a malformed RUNBOX_ALLOW_PRIVATE_HOSTS entry', () => {
    expect(() => new EgressGuard({ allowPrivateHosts: ['localhost'] })).toThrow(/host:port/);
  });
});
