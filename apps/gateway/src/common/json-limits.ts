import { AppError } from '@app/errors';

export interface JsonLimits {
  maxDepth: number;
  maxStringChars: number;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPENERS = new Set([0x5b, 0x7b]); // [ {
const CLOSERS = new Set([0x5d, 0x7d]); // ] }

/**
 * Checks a raw JSON body against the depth and string-length limits before it is parsed,
 * in one pass over the bytes: a body nested a hundred thousand levels deep is refused here,
 * before JSON.parse or any recursive walk could exhaust the stack. Strings are measured in
 * characters (UTF-8 continuation bytes do not count; an escape counts as what it spells).
 */
export function checkJsonLimits(body: Buffer, limits: JsonLimits): void {
  let depth = 0;
  let inString = false;
  let escaped = false;
  let chars = 0;
  for (const byte of body) {
    if (inString) {
      if (escaped) escaped = false;
      else if (byte === BACKSLASH) escaped = true;
      else if (byte === QUOTE) {
        inString = false;
        continue;
      }
      if ((byte & 0xc0) !== 0x80 && ++chars > limits.maxStringChars) {
        throw AppError.validation(`the request body has a string longer than ${limits.maxStringChars} characters (max_json_string_chars)`, {
          limit: 'max_json_string_chars',
          max: limits.maxStringChars,
        });
      }
    } else if (byte === QUOTE) {
      inString = true;
      chars = 0;
    } else if (OPENERS.has(byte)) {
      if (++depth > limits.maxDepth) {
        throw AppError.validation(`the request body nests deeper than ${limits.maxDepth} levels (max_json_depth)`, {
          limit: 'max_json_depth',
          max: limits.maxDepth,
        });
      }
    } else if (CLOSERS.has(byte)) {
      depth--;
    }
  }
}
