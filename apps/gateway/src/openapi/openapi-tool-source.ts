import { Injectable } from '@nestjs/common';
import { GatewayToolContext, GatewayToolResult, toolFailure } from '../tools/gateway-tool';
import { TenantTool, TenantToolListing, TenantToolSource } from '../tools/tenant-tool';
import { OpenApiOperation } from './openapi-document';
import { OpenApiServiceRow, OpenApiServicesRepository } from './openapi-services.repository';
import { OpenApiServicesService } from './openapi-services.service';
import { OPERATION_TIMEOUT_SECONDS, operationTool } from './operation-tool';
import { OperationCaller } from './operation-caller';

/**
 * The tenant's OpenAPI services as tools: one per stored operation, grouped under the
 * service's name. Listing reads the stored documents (nothing remote), so a service never
 * fails to list; a call that cannot reach its server fails as a call.
 */
@Injectable()
export class OpenApiToolSource implements TenantToolSource<OpenApiServiceRow[]> {
  constructor(
    private readonly services: OpenApiServicesRepository,
    private readonly service: OpenApiServicesService,
    private readonly caller: OperationCaller,
  ) {}

  read(tenantId: string): Promise<OpenApiServiceRow[]> {
    return this.services.list(tenantId);
  }

  list(tenantId: string, rows: OpenApiServiceRow[]): Promise<TenantToolListing> {
    return Promise.resolve({ tools: rows.flatMap((row) => row.document.operations.map((op) => this.tool(tenantId, row, op))), problems: [] });
  }

  private tool(tenantId: string, row: OpenApiServiceRow, op: OpenApiOperation): TenantTool {
    const shape = operationTool(row.name, op);
    return {
      definition: {
        name: shape.name,
        description: shape.description,
        parameters: shape.parameters,
        mutating: shape.mutating,
        toolsets: [],
        runsIn: 'gateway',
        timeoutSeconds: OPERATION_TIMEOUT_SECONDS,
      },
      inputSchema: shape.inputSchema,
      groups: [row.name],
      origin: `openapi:${row.name}`,
      execute: (ctx: GatewayToolContext, args: Record<string, unknown>): Promise<GatewayToolResult> => {
        let auth;
        try {
          auth = this.service.openAuth(tenantId, row);
        } catch (err) {
          // A key removed from the deployment, say: the call fails, the credential stays unnamed.
          return Promise.resolve(toolFailure(`The credential of the OpenAPI service ${row.name} cannot be used: ${err instanceof Error ? err.message : String(err)}`));
        }
        return this.caller.call(ctx, row.document.baseUrl, op, args, auth);
      },
    };
  }
}
