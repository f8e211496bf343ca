import { Controller, Get, Res } from '@nestjs/common';
import type { Response } from 'express';
import { ApiOperation, plainText } from '../api-docs/api-operation';
import { MetricsService } from './metrics.service';

@Controller()
export class MetricsController {
  constructor(private readonly metrics: MetricsService) {}

  @Get('metrics')
  @ApiOperation({ summary: 'Prometheus metrics', response: plainText('text/plain; version=0.0.4; charset=utf-8', 'the Prometheus text format') })
  async text(@Res({ passthrough: true }) res: Response): Promise<string> {
    // Set here, not with @Header: that would label a JSON error answer text/plain too.
    res.setHeader('content-type', 'text/plain; version=0.0.4; charset=utf-8');
    return this.metrics.text();
  }
}
