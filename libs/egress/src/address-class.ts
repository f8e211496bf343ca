import { isIPv4, isIPv6 } from 'node:net';

/** Why an address is not a public one; `public` addresses may be connected to. */
export type AddressClass =
  | 'public'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'unique-local'
  | 'multicast'
  | 'unspecified'
  | 'reserved'
  | 'invalid';

type Range = [prefix: number[], bits: number, kind: Exclude<AddressClass, 'public' | 'invalid'>];

const V4_RANGES: Range[] = [
  [[0, 0, 0, 0], 8, 'unspecified'],
  [[10, 0, 0, 0], 8, 'private'],
  [[100, 64, 0, 0], 10, 'private'], // carrier-grade NAT, shared address space
  [[127, 0, 0, 0], 8, 'loopback'],
  [[169, 254, 0, 0], 16, 'link-local'], // cloud metadata (169.254.169.254) lives here
  [[172, 16, 0, 0], 12, 'private'],
  [[192, 0, 0, 0], 24, 'reserved'],
  [[192, 0, 2, 0], 24, 'reserved'],
  [[192, 168, 0, 0], 16, 'private'],
  [[198, 18, 0, 0], 15, 'reserved'],
  [[198, 51, 100, 0], 24, 'reserved'],
  [[203, 0, 113, 0], 24, 'reserved'],
  [[224, 0, 0, 0], 4, 'multicast'],
  [[240, 0, 0, 0], 4, 'reserved'], // and 255.255.255.255, broadcast
];

const V6_RANGES: Range[] = [
  [[0x01, 0x00], 64, 'reserved'], // 100::/64, discard
  [[0x20, 0x01, 0x0d, 0xb8], 32, 'reserved'], // documentation
  [[0x20, 0x01, 0x00, 0x00], 32, 'reserved'], // Teredo: tunnels to an address we cannot see
  [[0xfc], 7, 'unique-local'],
  [[0xfe, 0x80], 10, 'link-local'],
  [[0xfe, 0xc0], 10, 'private'], // deprecated site-local
  [[0xff], 8, 'multicast'],
];

/**
 * Classifies one IP address, IPv4 or IPv6 in any spelling `net` accepts. IPv6 forms that
 * carry an IPv4 address (IPv4-mapped `::ffff:127.0.0.1`, IPv4-compatible `::127.0.0.1`,
 * NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are judged by the IPv4 address inside, since that
 * is where a connection would end up. Host names are not addresses: resolve them first.
 */
export function classifyAddress(address: string): AddressClass {
  const bytes = addressBytes(address);
  if (!bytes) return 'invalid';
  if (bytes.length === 4) return classify(bytes, V4_RANGES);
  const embedded = embeddedIPv4(bytes);
  if (embedded) return classify(embedded, V4_RANGES);
  if (bytes.every((b) => b === 0)) return 'unspecified';
  if (bytes.slice(0, 15).every((b) => b === 0) && bytes[15] === 1) return 'loopback';
  return classify(bytes, V6_RANGES);
}

/** The address as bytes (4 or 16), or null when it is not an IP address. */
export function addressBytes(address: string): number[] | null {
  const bare = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  if (isIPv4(bare)) return bare.split('.').map(Number);
  const noZone = bare.split('%')[0];
  if (!isIPv6(noZone)) return null;
  return ipv6Bytes(noZone);
}

function ipv6Bytes(text: string): number[] {
  let head = text;
  let v4: number[] = [];
  const lastColon = head.lastIndexOf(':');
  if (head.includes('.', lastColon)) {
    v4 = head.slice(lastColon + 1).split('.').map(Number);
    head = head.slice(0, lastColon + 1) + '0:0';
  }
  const [left, right] = head.includes('::') ? head.split('::') : [head, undefined];
  const groups = (s: string | undefined) => (s ? s.split(':').filter((g) => g !== '') : []);
  const l = groups(left);
  const r = groups(right);
  const words = right === undefined ? l : [...l, ...Array<string>(8 - l.length - r.length).fill('0'), ...r];
  const bytes = words.flatMap((w) => {
    const n = parseInt(w, 16);
    return [n >> 8, n & 0xff];
  });
  if (v4.length === 4) bytes.splice(12, 4, ...v4);
  return bytes;
}

function embeddedIPv4(b: number[]): number[] | null {
  const zeros = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return b.slice(12); // ::ffff:a.b.c.d
  if (zeros(0, 12) && !(zeros(12, 15) && b[15] <= 1)) return b.slice(12); // ::a.b.c.d (not :: or ::1)
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12)) return b.slice(12); // NAT64
  if (b[0] === 0x20 && b[1] === 0x02) return b.slice(2, 6); // 6to4
  return null;
}

function classify(bytes: number[], ranges: Range[]): AddressClass {
  for (const [prefix, bits, kind] of ranges) if (inPrefix(bytes, prefix, bits)) return kind;
  return 'public';
}

function inPrefix(bytes: number[], prefix: number[], bits: number): boolean {
  for (let i = 0; i * 8 < bits; i++) {
    const take = Math.min(8, bits - i * 8);
    const mask = (0xff << (8 - take)) & 0xff;
    if ((bytes[i] & mask) !== ((prefix[i] ?? 0) & mask)) return false;
  }
  return true;
}
