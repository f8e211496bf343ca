import { Controller, Get, Res } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import type { Response } from 'express';
import { z } from 'zod';
import { routesOf } from '../common/validation/route-catalogue';
import { ApiDocument, buildApiDocument } from './api-document';
import { ApiOperation, plainText } from './api-operation';
import { REFERENCE_CSP, REFERENCE_CSS, REFERENCE_HTML, REFERENCE_SCRIPT } from './reference-page';

/** The API document (OpenAPI 3.1) and the reference page that renders it. Public, like /healthz. */
@Controller()
export class ApiDocsController {
  private document?: ApiDocument;

  constructor(private readonly modules: ModulesContainer) {}

  @Get('openapi.json')
  @ApiOperation({
    summary: 'This document: every route, its parameters, bodies, answers and error codes (OpenAPI 3.1)',
    response: z.object({ openapi: z.literal('3.1.0') }).loose(),
    tag: 'reference',
  })
  openApi(): ApiDocument {
    // Routes are fixed once the app has started, so the document is built once.
    this.document ??= buildApiDocument(routesOf(this.modules));
    return this.document;
  }

  @Get('docs')
  @ApiOperation({ summary: 'The reference page: this document rendered for reading', response: plainText('text/html; charset=utf-8', 'an HTML page'), tag: 'reference' })
  page(@Res({ passthrough: true }) res: Response): string {
    return asset(res, 'text/html; charset=utf-8', REFERENCE_HTML);
  }

  @Get('docs/reference.js')
  @ApiOperation({ summary: "The reference page's script", response: plainText('text/javascript; charset=utf-8', 'JavaScript'), tag: 'reference' })
  script(@Res({ passthrough: true }) res: Response): string {
    return asset(res, 'text/javascript; charset=utf-8', REFERENCE_SCRIPT);
  }

  @Get('docs/reference.css')
  @ApiOperation({ summary: "The reference page's style sheet", response: plainText('text/css; charset=utf-8', 'CSS'), tag: 'reference' })
  style(@Res({ passthrough: true }) res: Response): string {
    return asset(res, 'text/css; charset=utf-8', REFERENCE_CSS);
  }
}

/** Set in the handler, not with @Header, so an error answer keeps its JSON content type. */
function asset(res: Response, contentType: string, body: string): string {
  res.setHeader('content-type', contentType);
  res.setHeader('content-security-policy', REFERENCE_CSP);
  res.setHeader('x-content-type-options', 'nosniff');
  res.setHeader('referrer-policy', 'no-referrer');
  res.setHeader('cache-control', 'no-cache');
  return body;
}
