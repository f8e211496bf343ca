import { Injectable, OnModuleInit } from '@nestjs/common';
import { MetricsService } from '../metrics/metrics.service';
import { RunSweepsRepository } from './run-sweeps.repository';

/** Gives the metrics the deployment's count of active runs by status, read at each scrape. */
@Injectable()
export class ActiveRunsGauge implements OnModuleInit {
  constructor(
    private readonly metrics: MetricsService,
    private readonly sweeps: RunSweepsRepository,
  ) {}

  onModuleInit(): void {
    this.metrics.watchActiveRuns(() => this.sweeps.countActiveByStatus());
  }
}
