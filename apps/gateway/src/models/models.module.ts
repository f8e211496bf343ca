import { Module } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { AnthropicMessagesProvider } from './anthropic-messages.provider';
import { ModelError, ModelProvider, ModelRequest, ModelResponse, MODEL_PROVIDER } from './model-provider';
import { OpenAiChatProvider } from './openai-chat.provider';
import { TimedModelProvider } from './timed-model-provider';
import { MetricsService } from '../metrics/metrics.service';

/** Chosen when no model is configured: every call fails with a message saying so. */
class UnconfiguredProvider implements ModelProvider {
  complete(_request: ModelRequest): Promise<ModelResponse> {
    return Promise.reject(new ModelError('no model provider is configured: set RUNBOX_MODEL_BASE_URL', false));
  }
}

export function createModelProvider(config: RunboxConfig): ModelProvider {
  if (!config.RUNBOX_MODEL_BASE_URL) return new UnconfiguredProvider();
  const connection = { baseUrl: config.RUNBOX_MODEL_BASE_URL, apiKey: config.RUNBOX_MODEL_API_KEY, timeoutMs: config.RUNBOX_MODEL_TIMEOUT_MS };
  if (config.RUNBOX_MODEL_PROVIDER === 'anthropic') return new AnthropicMessagesProvider({ ...connection, maxTokens: config.RUNBOX_MODEL_MAX_TOKENS });
  return new OpenAiChatProvider({ ...connection, stream: config.RUNBOX_MODEL_STREAM });
}

@Module({
  providers: [
    {
      provide: MODEL_PROVIDER,
      inject: [RUNBOX_CONFIG, MetricsService],
      useFactory: (config: RunboxConfig, metrics: MetricsService) =>
        new TimedModelProvider(createModelProvider(config), (call) => metrics.modelCallEnded({ ...call, provider: config.RUNBOX_MODEL_PROVIDER })),
    },
  ],
  exports: [MODEL_PROVIDER],
})
export class ModelsModule {}
