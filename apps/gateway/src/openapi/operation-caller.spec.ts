import { withinServer } from './operation-caller';

describe('withinServer', () => {
  it('keeps redirects on the server’s origin and under its base path', () => {
    const base = 'https://api.example.com/v1';
    expect(withinServer(new URL('https://api.example.com/v1/pets/2'), base)).toBe(true);
    expect(withinServer(new URL('https://api.example.com/v1'), base)).toBe(true);
    expect(withinServer(new URL('https://api.example.com/v10/pets'), base)).toBe(false);
    expect(withinServer(new URL('https://api.example.com/admin'), base)).toBe(false);
    expect(withinServer(new URL('http://api.example.com/v1/pets'), base)).toBe(false);
    expect(withinServer(new URL('https://api.example.com:8443/v1/pets'), base)).toBe(false);
    expect(withinServer(new URL('https://evil.example/v1/pets'), base)).toBe(false);
    expect(withinServer(new URL('https://api.example.com/anything'), 'https://api.example.com')).toBe(true);
  });
});
