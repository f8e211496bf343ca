import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

/** Random ids with a type prefix (`ses_…`, `run_…`), so an id says what it names. */
export function newId(prefix: string, length = 20): string {
  const bytes = randomBytes(length);
  let out = '';
  for (const b of bytes) out += ALPHABET[b % ALPHABET.length];
  return `${prefix}_${out}`;
}

export const ID_PATTERN = /^[a-z]{2,5}_[0-9a-z]{8,40}$/;
