import { Inject, Injectable } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { EgressRefusedError, FetchFailedError, GuardedResponse } from '@app/egress';
import { AppError, ErrorCode } from '@app/errors';
import { CredentialCipher } from '@app/ssh';
import { ToolRegistry } from '../tools/tool-registry';
import { Outbound } from '../web/outbound';
import { OpenApiDocumentError, parseSpecText, readOpenApiDocument, SkippedOperation } from './openapi-document';
import { OpenApiServiceRow, OpenApiServicesRepository, ServiceNameTakenError } from './openapi-services.repository';
import { CreateServiceInput, OpenApiAuth } from './openapi-services.schemas';
import { operationTool } from './operation-tool';

/** Bytes of a document fetched from spec_url; a longer one is refused. */
export const MAX_FETCHED_SPEC_BYTES = 2 * 1024 * 1024;
/** How long fetching spec_url may take. */
export const SPEC_FETCH_TIMEOUT_MS = 15_000;
const SPEC_FETCH_REDIRECTS = 5;

/** What the API shows of a service: never its credential. */
export interface ServiceView {
  id: string;
  name: string;
  title: string;
  spec_url: string | null;
  server: string;
  auth: { type: string } | null;
  tools: Array<{ name: string; operation_id: string; method: string; path: string; mutating: boolean }>;
  created_at: string;
}

/** The associated data a sealed credential is bound to: it opens only in its own row. */
export function serviceAuthAad(tenantId: string, serviceId: string): string {
  return `runbox.openapi_services:${tenantId}:${serviceId}`;
}

/**
 * OpenAPI services: reads and checks the document (fetched once, through the egress guard,
 * or given inline), keeps the subset calls need, and seals the credential.
 */
@Injectable()
export class OpenApiServicesService {
  readonly cipher: CredentialCipher | undefined;

  constructor(
    private readonly services: OpenApiServicesRepository,
    private readonly outbound: Outbound,
    private readonly registry: ToolRegistry,
    @Inject(RUNBOX_CONFIG) config: RunboxConfig,
  ) {
    if (config.RUNBOX_CREDENTIALS_KEY) this.cipher = new CredentialCipher(config.RUNBOX_CREDENTIALS_KEY, config.RUNBOX_CREDENTIALS_PREVIOUS_KEYS);
  }

  async create(tenantId: string, input: CreateServiceInput): Promise<ServiceView & { skipped: SkippedOperation[] }> {
    if (this.registry.get(input.name)) throw AppError.validation(`body.name: "${input.name}" is a built-in tool's name`);
    const cipher = input.auth ? this.requireCipher() : undefined;
    const raw = input.spec_url !== undefined ? await this.fetchSpec(tenantId, input.spec_url) : { text: input.spec!, url: undefined };
    const field = input.spec_url !== undefined ? 'body.spec_url' : 'body.spec';
    let read;
    try {
      read = readOpenApiDocument(typeof raw.text === 'string' ? parseSpecText(raw.text) : raw.text, { specUrl: raw.url, chosen: input.operations });
    } catch (err) {
      if (err instanceof OpenApiDocumentError) throw AppError.validation(`${err.message.startsWith('operations:') ? 'body.' : `${field}: `}${err.message}`);
      throw err;
    }
    try {
      const row = await this.services.create(tenantId, {
        name: input.name,
        specUrl: input.spec_url ?? null,
        document: read.document,
        authType: input.auth?.type ?? null,
        ...(input.auth && cipher ? { sealAuth: (id: string) => cipher.seal(JSON.stringify(input.auth), serviceAuthAad(tenantId, id)) } : {}),
      });
      return { ...viewOf(row), skipped: read.skipped };
    } catch (err) {
      if (err instanceof ServiceNameTakenError) throw new AppError(ErrorCode.Conflict, err.message);
      throw err;
    }
  }

  async list(tenantId: string): Promise<ServiceView[]> {
    return (await this.services.list(tenantId)).map(viewOf);
  }

  async get(tenantId: string, id: string): Promise<ServiceView> {
    const row = await this.services.get(tenantId, id);
    if (!row) throw AppError.notFound('OpenAPI service', id);
    return viewOf(row);
  }

  async delete(tenantId: string, id: string): Promise<void> {
    if (!(await this.services.delete(tenantId, id))) throw AppError.notFound('OpenAPI service', id);
  }

  /** The service's credential, opened for one call; undefined when it has none. */
  openAuth(tenantId: string, row: OpenApiServiceRow): OpenApiAuth | undefined {
    if (!row.auth) return undefined;
    return JSON.parse(this.requireCipher().open(row.auth, serviceAuthAad(tenantId, row.id))) as OpenApiAuth;
  }

  private async fetchSpec(tenantId: string, url: string): Promise<{ text: string; url: string }> {
    let res: GuardedResponse;
    try {
      res = await this.outbound.fetch(tenantId, url, {
        timeoutMs: SPEC_FETCH_TIMEOUT_MS,
        maxBytes: MAX_FETCHED_SPEC_BYTES,
        maxRedirects: SPEC_FETCH_REDIRECTS,
        headers: { accept: 'application/json, application/yaml, text/yaml;q=0.9, */*;q=0.5' },
      });
    } catch (err) {
      if (err instanceof EgressRefusedError || err instanceof FetchFailedError) throw AppError.validation(`body.spec_url: could not fetch the document: ${err.message}`);
      throw err;
    }
    if (res.status < 200 || res.status >= 300) throw AppError.validation(`body.spec_url: fetching the document answered HTTP ${res.status}`);
    if (res.truncated) throw AppError.validation(`body.spec_url: the document is larger than ${MAX_FETCHED_SPEC_BYTES} bytes`);
    return { text: res.body.toString('utf8'), url: res.url };
  }

  private requireCipher(): CredentialCipher {
    if (!this.cipher) {
      throw new AppError(ErrorCode.Unavailable, 'OpenAPI service credentials need RUNBOX_CREDENTIALS_KEY (the key that encrypts them); the operator has not set it');
    }
    return this.cipher;
  }
}

export function viewOf(row: OpenApiServiceRow): ServiceView {
  return {
    id: row.id,
    name: row.name,
    title: row.document.title,
    spec_url: row.specUrl,
    server: row.document.baseUrl,
    auth: row.authType ? { type: row.authType } : null,
    tools: row.document.operations.map((op) => {
      const tool = operationTool(row.name, op);
      return { name: tool.name, operation_id: op.operationId, method: op.method.toUpperCase(), path: op.path, mutating: tool.mutating };
    }),
    created_at: row.createdAt.toISOString(),
  };
}
