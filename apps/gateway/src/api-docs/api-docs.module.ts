import { Module } from '@nestjs/common';
import { ApiDocsController } from './api-docs.controller';

/** GET /openapi.json and GET /docs: the HTTP API described from its own routes and schemas. */
@Module({ controllers: [ApiDocsController] })
export class ApiDocsModule {}
