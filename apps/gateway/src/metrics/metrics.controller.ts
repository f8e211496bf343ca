import { Controller, Get, Header, Query } from '@nestjs/common';
import { noQuerySchema } from '../common/metadata';
import { validate } from '../common/validate';
import { MetricsService } from './metrics.service';

@Controller()
export class MetricsController {
  constructor(private readonly metrics: MetricsService) {}

  @Get('metrics')
  @Header('content-type', 'text/plain; version=0.0.4; charset=utf-8')
  text(@Query() query: unknown): Promise<string> {
    validate(noQuerySchema, query, 'query');
    return this.metrics.text();
  }
}
