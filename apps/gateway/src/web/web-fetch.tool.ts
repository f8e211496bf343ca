import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { EgressRefusedError, FetchFailedError, GuardedResponse } from '@app/egress';
import { z } from 'zod';
import { GatewayTool, GatewayToolContext, GatewayToolResult, toolFailure, toolOutput } from '../tools/gateway-tool';
import { SandboxFileReader, SandboxFiles } from '../tools/sandbox-files';
import { applyOutputBudget } from '../tools/output-budget';
import { Outbound } from './outbound';
import { htmlToMarkdown } from './page-to-markdown';
import { fitOrSpill, spillPath } from './workspace-spill';

/** Bytes of a response kept (a PDF included); the rest is not downloaded. */
export const WEB_FETCH_MAX_BYTES = 20 * 1024 * 1024;
const MAX_REDIRECTS = 10;
/** Of a failed response's body, this much is shown. */
const ERROR_BODY_BYTES = 2048;
/** Pages of a PDF read into the answer; the rest is read with read_file. */
const PDF_PAGES = '1-50';

const parameters = z
  .object({
    url: z.string().min(1).max(8192).describe('An http(s) URL.'),
    max_chars: z.number().int().min(200).optional().describe('Cap on the characters returned (the output budget applies anyway).'),
  })
  .strict();

type WebFetchArgs = z.infer<typeof parameters>;

/** web_fetch: one URL as readable Markdown (HTML), text, JSON or a PDF's text. */
@Injectable()
export class WebFetchTool implements GatewayTool {
  readonly definition = {
    name: 'web_fetch',
    description:
      'Fetch a web page or document by URL and return its readable content as Markdown (navigation and clutter removed); plain text and JSON come back as they are, PDFs as their text. Faster and cheaper than browser: use browser only when the page needs JavaScript, a login or a form. A page longer than the output budget is saved whole into the workspace and the answer says where, with the read_file offset to continue.',
    parameters,
    mutating: false,
    toolsets: ['research' as const, 'browser' as const],
    runsIn: 'gateway' as const,
    timeoutSeconds: 60,
  };

  constructor(
    private readonly outbound: Outbound,
    private readonly files: SandboxFiles,
  ) {}

  async execute(ctx: GatewayToolContext, args: WebFetchArgs): Promise<GatewayToolResult> {
    let res: GuardedResponse;
    try {
      res = await this.outbound.fetch(ctx.tenantId, args.url, {
        timeoutMs: ctx.timeoutMs,
        maxBytes: WEB_FETCH_MAX_BYTES,
        maxRedirects: MAX_REDIRECTS,
        signal: ctx.signal,
        headers: { accept: 'text/html,application/xhtml+xml,application/json,text/plain;q=0.9,application/pdf;q=0.8,*/*;q=0.5' },
      });
    } catch (err) {
      if (err instanceof EgressRefusedError) return toolFailure(`Refused to fetch ${args.url}: ${err.message}`, { error_code: err.code, url: args.url });
      if (err instanceof FetchFailedError) return toolFailure(`Could not fetch ${args.url}: ${err.message}`, { error_code: err.code, url: args.url });
      throw err;
    }
    const meta = {
      url: res.url,
      status: res.status,
      content_type: contentType(res),
      bytes: res.body.length,
      ...(res.redirects.length ? { redirects: res.redirects } : {}),
      ...(res.truncated ? { download_truncated: true } : {}),
    };
    if (res.status >= 400) {
      const body = res.body.subarray(0, ERROR_BODY_BYTES).toString('utf8');
      return toolFailure(`HTTP ${res.status} from ${res.url}\n\n${body}${res.body.length > ERROR_BODY_BYTES ? '\n… (body cut at 2 KB)' : ''}`, meta);
    }
    const budget = Math.min(ctx.maxOutputChars, args.max_chars ?? Number.MAX_SAFE_INTEGER);
    const files = this.files.reader({ ...ctx, callId: ctx.callId ?? `web_fetch:${randomUUID()}`, timeoutMs: Math.min(ctx.timeoutMs, 60_000) });
    const withExecutor = (r: GatewayToolResult): GatewayToolResult => ({ ...r, executorId: files.executorId ?? undefined });

    const type = meta.content_type;
    if (type === 'application/pdf' || res.body.subarray(0, 5).toString('latin1') === '%PDF-') {
      return withExecutor(await this.pdf(files, res, budget, meta));
    }
    const text = decodeText(res);
    let document: string;
    if (type === 'text/html' || type === 'application/xhtml+xml' || (type === '' && /^\s*<(!doctype html|html)/i.test(text))) {
      const page = htmlToMarkdown(text, res.url);
      document = `${page.title ? `# ${page.title}\n` : ''}Source: ${res.url}\n\n${page.markdown}`;
    } else if (type.endsWith('json')) {
      document = prettyJson(text);
    } else if (type.startsWith('text/') || type === 'application/xml' || type === '') {
      document = text;
    } else {
      return toolFailure(`${res.url} is ${type} (${res.body.length} bytes), which web_fetch cannot show as text.`, meta);
    }
    if (res.truncated) document += `\n\n… the download stopped at ${WEB_FETCH_MAX_BYTES} bytes`;
    const outcome = await fitOrSpill(files, document, budget, spillPath(res.url, 'md'));
    if (outcome.spilled) {
      return withExecutor(toolOutput(outcome.output, { ...meta, chars: outcome.totalChars, saved_to: outcome.path, lines: outcome.totalLines, next_offset: outcome.nextOffset }));
    }
    return withExecutor(toolOutput(applyOutputBudget(outcome.output, budget), { ...meta, chars: document.length }));
  }

  /**
   * A PDF is parsed inside the session's sandbox, never on the gateway host: its bytes are
   * saved into the workspace and read_file extracts the text there.
   */
  private async pdf(files: SandboxFileReader, res: GuardedResponse, budget: number, meta: Record<string, unknown>): Promise<GatewayToolResult> {
    const path = spillPath(res.url, 'pdf');
    const saved = await files.write(path, res.body);
    if (!saved.ok) return toolFailure(`Fetched ${res.url} (a PDF, ${res.body.length} bytes) but could not save it: ${saved.message}`, meta);
    const read = await files.call('read_file', { path: saved.path, pages: PDF_PAGES }, budget);
    const header = `PDF from ${res.url}, saved as ${saved.path} (${res.body.length} bytes); read_file with pages reads further.\n\n`;
    if (read.is_error) return toolFailure(`${header}Its text could not be read: ${read.output}`, { ...meta, saved_to: saved.path });
    return toolOutput(applyOutputBudget(header + read.output, budget), { ...meta, saved_to: saved.path, pdf: read.metadata });
  }
}

function contentType(res: GuardedResponse): string {
  return String(res.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
}

function decodeText(res: GuardedResponse): string {
  const charset = /charset=([^;]+)/i.exec(String(res.headers['content-type'] ?? ''))?.[1]?.trim().replace(/"/g, '').toLowerCase();
  try {
    return new TextDecoder(charset || 'utf-8').decode(res.body);
  } catch {
    return res.body.toString('utf8');
  }
}

function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
