import { Controller, Get, Inject, Param, Res } from '@nestjs/common';
import { AppError, ErrorCode } from '@app/errors';
import type { Response } from 'express';
import { ApiOperation, plainText } from '../api-docs/api-operation';
import { CONSOLE_CSP, ConsoleAsset } from './console-assets';

export const CONSOLE_ASSETS = Symbol('CONSOLE_ASSETS');

/**
 * The web console: static files on the API's own origin, so its fetch calls need no CORS and
 * the API key never leaves the page except in an Authorization header. No authentication
 * here: the files hold no data, and every call they make is authenticated by the API.
 */
@Controller('console')
export class ConsoleController {
  constructor(@Inject(CONSOLE_ASSETS) private readonly assets: Map<string, ConsoleAsset>) {}

  @Get()
  @ApiOperation({ summary: 'The web console (docs/console.md)', response: plainText('text/html; charset=utf-8', 'the console page'), tag: 'console' })
  index(@Res() res: Response): void {
    this.send(res, 'index.html');
  }

  @Get(':file')
  @ApiOperation({ summary: "One of the console's static files (its script and style sheet)", response: plainText('text/javascript; charset=utf-8', 'the file'), tag: 'console' })
  file(@Param('file') file: string, @Res() res: Response): void {
    this.send(res, file);
  }

  private send(res: Response, name: string): void {
    const asset = this.assets.get(name);
    if (!asset) {
      if (this.assets.size === 0) throw new AppError(ErrorCode.NotFound, 'the console is not built here: `npm run build` builds it');
      throw AppError.notFound('console file', name);
    }
    res
      .status(200)
      .set({
        'content-type': asset.contentType,
        'content-length': String(asset.body.length),
        'content-security-policy': CONSOLE_CSP,
        'x-content-type-options': 'nosniff',
        'x-frame-options': 'DENY',
        'referrer-policy': 'no-referrer',
        'cross-origin-opener-policy': 'same-origin',
        // The bundle's names do not change with its content: revalidate every load.
        'cache-control': 'no-cache',
      })
      .end(asset.body);
  }
}
