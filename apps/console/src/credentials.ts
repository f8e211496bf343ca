/**
 * The API key and admin token live in sessionStorage: gone when the tab closes, never in a
 * URL (where logs, history and Referer headers would keep them), sent only as a header.
 */
const API_KEY = 'runbox.apiKey';
const ADMIN_TOKEN = 'runbox.adminToken';

export interface Credentials {
  apiKey: string | null;
  adminToken: string | null;
}

export function loadCredentials(): Credentials {
  return { apiKey: sessionStorage.getItem(API_KEY), adminToken: sessionStorage.getItem(ADMIN_TOKEN) };
}

export function saveCredentials(c: Credentials): void {
  for (const [name, value] of [
    [API_KEY, c.apiKey],
    [ADMIN_TOKEN, c.adminToken],
  ] as const) {
    if (value) sessionStorage.setItem(name, value);
    else sessionStorage.removeItem(name);
  }
}
