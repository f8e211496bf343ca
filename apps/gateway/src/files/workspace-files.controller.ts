import { Controller, Delete, Get, HttpCode, Post, Put, Req, Res, UseGuards } from '@nestjs/common';
import { AppError, ErrorCode } from '@app/errors';
import type { Request, Response } from 'express';
import { pipeline } from 'node:stream/promises';
import { z } from 'zod';
import { ApiOperation, plainText } from '../api-docs/api-operation';
import { ApiKeyGuard } from '../auth/api-key.guard';
import { TenantId } from '../common/request-context';
import { PathId, ValidQuery } from '../common/validation/request-parts';
import { attachmentDisposition, downloadHeaders } from './content-types';
import { deletedPathSchema, importedArchiveSchema, writtenFileSchema } from './workspace-files.responses';
import { WorkspaceFilesService } from './workspace-files.service';

const deleteQuerySchema = z.object({ recursive: z.enum(['true', 'false']).optional() }).strict();
/** The folder to export or import into: relative to the workspace, or absolute under /workspace; the workspace itself by default. */
const archiveQuerySchema = z.object({ path: z.string().min(1).max(4096).optional() }).strict();

/**
 * A session's workspace files over HTTP (docs/files-api.md): raw bytes in and out of one
 * file, a folder as a tar. Bodies are streamed, never parsed as JSON (bootstrap.ts leaves
 * these routes' bodies alone).
 */
@Controller('v1/sessions/:id')
@UseGuards(ApiKeyGuard)
export class WorkspaceFilesController {
  constructor(private readonly files: WorkspaceFilesService) {}

  @Get('files/*path')
  @ApiOperation({
    summary: "Download a workspace file's raw bytes",
    description: 'Content type by extension (application/octet-stream otherwise); active content comes as an attachment. An idle sandbox is started first.',
    response: plainText('application/octet-stream', 'the file'),
    errors: [ErrorCode.NotFound, ErrorCode.Conflict, ErrorCode.UnsupportedBackend, ErrorCode.ExecutorUnavailable, ErrorCode.SandboxFailed],
    tag: 'files',
  })
  async download(@TenantId() tenantId: string, @PathId('session') sessionId: string, @Req() req: Request, @Res() res: Response): Promise<void> {
    const file = await this.files.read(tenantId, sessionId, filePath(req));
    const type = downloadHeaders(file.path);
    res.status(200);
    res.setHeader('Content-Type', type.contentType);
    res.setHeader('Content-Length', String(file.size));
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Content-Security-Policy', "default-src 'none'; sandbox");
    if (type.attachment) res.setHeader('Content-Disposition', attachmentDisposition(file.path));
    await streamOut(file.body, res);
  }

  @Put('files/*path')
  @ApiOperation({
    summary: 'Upload a file as the raw body (Content-Length required), making missing folders; all or nothing',
    response: writtenFileSchema,
    errors: [ErrorCode.LengthRequired, ErrorCode.PayloadTooLarge, ErrorCode.Conflict, ErrorCode.UnsupportedBackend, ErrorCode.ExecutorUnavailable, ErrorCode.SandboxFailed],
    tag: 'files',
  })
  @HttpCode(200)
  async upload(@TenantId() tenantId: string, @PathId('session') sessionId: string, @Req() req: Request) {
    const path = filePath(req);
    const size = declaredLength(req);
    if (size > this.files.maxBytes) {
      throw new AppError(ErrorCode.PayloadTooLarge, `the file is ${size} bytes, over the ${this.files.maxBytes}-byte limit (RUNBOX_FILES_MAX_BYTES); nothing was written`);
    }
    return this.files.write(tenantId, sessionId, path, req, size);
  }

  @Delete('files/*path')
  @ApiOperation({
    summary: 'Delete a file, or a folder with recursive=true (a symlink itself, never its target)',
    response: deletedPathSchema,
    errors: [ErrorCode.NotFound, ErrorCode.Conflict, ErrorCode.UnsupportedBackend, ErrorCode.ExecutorUnavailable, ErrorCode.SandboxFailed],
    tag: 'files',
  })
  @HttpCode(200)
  async remove(@TenantId() tenantId: string, @PathId('session') sessionId: string, @Req() req: Request, @ValidQuery(deleteQuerySchema) q: z.output<typeof deleteQuerySchema>) {
    return this.files.delete(tenantId, sessionId, filePath(req), q.recursive === 'true');
  }

  @Get('archive')
  @ApiOperation({
    summary: 'Export a workspace folder as a tar (links kept as links, never followed)',
    response: plainText('application/x-tar', 'a tar of the folder'),
    errors: [ErrorCode.NotFound, ErrorCode.Conflict, ErrorCode.UnsupportedBackend, ErrorCode.ExecutorUnavailable, ErrorCode.SandboxFailed],
    tag: 'files',
  })
  async exportFolder(@TenantId() tenantId: string, @PathId('session') sessionId: string, @ValidQuery(archiveQuerySchema) q: z.output<typeof archiveQuerySchema>, @Res() res: Response): Promise<void> {
    const folder = await this.files.exportFolder(tenantId, sessionId, q.path ?? '.');
    const name = folder.path === '.' ? 'workspace' : folder.path.split('/').pop();
    res.status(200);
    res.setHeader('Content-Type', 'application/x-tar');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Content-Disposition', attachmentDisposition(`${name ?? 'workspace'}.tar`));
    await streamOut(folder.tar, res);
  }

  @Post('archive')
  @ApiOperation({
    summary: 'Import a tar into a workspace folder; any refused entry means nothing is written',
    response: importedArchiveSchema,
    errors: [ErrorCode.PayloadTooLarge, ErrorCode.Conflict, ErrorCode.UnsupportedBackend, ErrorCode.ExecutorUnavailable, ErrorCode.SandboxFailed],
    tag: 'files',
  })
  @HttpCode(200)
  async importFolder(@TenantId() tenantId: string, @PathId('session') sessionId: string, @ValidQuery(archiveQuerySchema) q: z.output<typeof archiveQuerySchema>, @Req() req: Request) {
    const length = req.headers['content-length'];
    if (length !== undefined && Number(length) > this.files.maxBytes * 2) {
      throw new AppError(ErrorCode.PayloadTooLarge, `the archive is ${length} bytes, far over the ${this.files.maxBytes}-byte limit on what it may unpack; nothing was written`);
    }
    return this.files.importFolder(tenantId, sessionId, q.path ?? '.', req);
  }
}

/** The path after /files/, as the client sent it (percent-decoded); `..` and the like are the sandbox's to refuse. */
function filePath(req: Request): string {
  const raw: unknown = (req.params as Record<string, unknown>).path;
  const path = Array.isArray(raw) ? raw.join('/') : typeof raw === 'string' ? raw : '';
  if (path === '' || path.length > 4096 || path.includes('\0')) throw AppError.validation('path: name a file inside the workspace (at most 4096 characters, no NUL)');
  return path;
}

function declaredLength(req: Request): number {
  const header = req.headers['content-length'];
  if (header === undefined) {
    throw new AppError(ErrorCode.LengthRequired, 'send the file with a Content-Length header: its size must be known before it is stored (chunked uploads are not taken)');
  }
  if (!/^\d{1,15}$/.test(header)) throw AppError.validation('header.content-length: not a byte count');
  return Number(header);
}

/** Streams a body out; a failure half-way can only cut the connection, as the status is sent. */
async function streamOut(body: NodeJS.ReadableStream, res: Response): Promise<void> {
  try {
    await pipeline(body, res);
  } catch {
    res.destroy();
  }
}
