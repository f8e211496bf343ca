import type { Request, Response } from 'express';
import { takeUndecodablePathSegmentsLiterally } from './undecodable-path';

const rewrite = (url: string): string => {
  const req = { url } as Request;
  let called = false;
  takeUndecodablePathSegmentsLiterally(req, {} as Response, () => (called = true));
  expect(called).toBe(true);
  return req.url;
};

describe('takeUndecodablePathSegmentsLiterally', () => {
  it('leaves paths that decode alone, query strings included', () => {
    expect(rewrite('/v1/sessions/ses_abc')).toBe('/v1/sessions/ses_abc');
    expect(rewrite('/v1/sessions/a%20b?x=%FF')).toBe('/v1/sessions/a%20b?x=%FF');
  });

  it('escapes the percent signs of a segment that does not decode, and only that segment', () => {
    expect(rewrite('/v1/sessions/%FF')).toBe('/v1/sessions/%25FF');
    expect(rewrite('/v1/runs/%ED%A0%80/events?last_event_id=1')).toBe('/v1/runs/%25ED%25A0%2580/events?last_event_id=1');
    expect(rewrite('/v1/a%20b/%E0%A4%A')).toBe('/v1/a%20b/%25E0%25A4%25A');
    expect(decodeURIComponent(rewrite('/v1/sessions/%FF').split('/')[3])).toBe('%FF');
  });
});
