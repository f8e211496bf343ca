import { ModelCallOutcome } from '../metrics/metrics.service';
import { ModelError, ModelProvider, ModelRequest, ModelResponse } from './model-provider';

/** What one model call came to, for whoever keeps the figures. */
export interface ModelCallRecord {
  model: string;
  outcome: ModelCallOutcome;
  seconds: number;
  retryable?: boolean;
}

/**
 * A provider that reports each call's latency and outcome. Every attempt counts (the run
 * loop retries retryable failures), so errors show even when a retry then succeeds.
 */
export class TimedModelProvider implements ModelProvider {
  constructor(
    private readonly inner: ModelProvider,
    private readonly record: (call: ModelCallRecord) => void,
  ) {}

  async complete(request: ModelRequest): Promise<ModelResponse> {
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1000;
    try {
      const response = await this.inner.complete(request);
      this.record({ model: request.model, outcome: 'ok', seconds: seconds() });
      return response;
    } catch (err) {
      if (request.signal?.aborted) this.record({ model: request.model, outcome: 'aborted', seconds: seconds() });
      else this.record({ model: request.model, outcome: 'error', seconds: seconds(), retryable: err instanceof ModelError && err.retryable });
      throw err;
    }
  }
}
