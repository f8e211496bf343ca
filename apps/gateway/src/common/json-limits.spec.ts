import { AppError } from '@app/errors';
import { checkJsonLimits } from './json-limits';

const limits = { maxDepth: 4, maxStringChars: 10 };
const check = (text: string) => checkJsonLimits(Buffer.from(text, 'utf8'), limits);
const failure = (text: string): AppError => {
  try {
    check(text);
  } catch (err) {
    return err as AppError;
  }
  throw new Error(`accepted ${text}`);
};

describe('checkJsonLimits', () => {
  it('accepts bodies within both limits', () => {
    expect(() => check('{"a":[1,{"b":[]}],"s":"0123456789"}')).not.toThrow();
  });

  it('refuses nesting past the limit, naming it', () => {
    const err = failure('[[[[[1]]]]]');
    expect(err.message).toMatch(/deeper than 4 levels \(max_json_depth\)/);
    expect(err.details).toEqual({ limit: 'max_json_depth', max: 4 });
  });

  it('does not count brackets inside strings, or escaped quotes as string ends', () => {
    expect(() => check('{"a":"[[[[[","b":"\\"{{{{{"}')).not.toThrow();
  });

  it('refuses a long string, counting characters rather than bytes', () => {
    expect(() => check(JSON.stringify({ s: 'é'.repeat(10) }))).not.toThrow();
    expect(failure(JSON.stringify({ s: 'é'.repeat(11) })).message).toMatch(/longer than 10 characters \(max_json_string_chars\)/);
    expect(failure(JSON.stringify({ ['k'.repeat(11)]: 1 })).details).toEqual({ limit: 'max_json_string_chars', max: 10 });
  });

  it('scans a pathologically deep body without recursion', () => {
    expect(() => checkJsonLimits(Buffer.from('['.repeat(500_000)), { maxDepth: 32, maxStringChars: 10 })).toThrow(/max_json_depth/);
  });
});
