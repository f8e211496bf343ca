import http, { IncomingMessage } from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';

export interface CheckedRequestInit {
  method: string;
  headers: Record<string, string>;
  body?: Buffer | string;
  signal?: AbortSignal;
}

/**
 * One HTTP request to `url`, sent to `address`: the address the egress guard checked for
 * that URL's host, so no second DNS lookup can lead anywhere else. The Host header and the
 * TLS server name still name the URL's host. A fresh socket every time: a pooled one could
 * be to an address checked for another host. Resolves at the response's headers; errors
 * are passed on as Node gives them, for the caller to word.
 */
export function requestCheckedAddress(url: URL, address: string, init: CheckedRequestInit): Promise<IncomingMessage> {
  const client = url.protocol === 'https:' ? https : http;
  const hostname = url.hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve, reject) => {
    const req = client.request(
      {
        host: address,
        port: url.port || undefined,
        path: `${url.pathname}${url.search}`,
        method: init.method,
        agent: false,
        headers: { ...init.headers, host: url.host },
        servername: isIP(hostname) ? undefined : hostname,
        signal: init.signal,
      },
      resolve,
    );
    req.on('error', reject);
    req.end(init.body);
  });
}
