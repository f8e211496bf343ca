import { Module } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { ModelError, ModelProvider, ModelRequest, ModelResponse, MODEL_PROVIDER } from './model-provider';
import { OpenAiChatProvider } from './openai-chat.provider';

/** Chosen when no model is configured: every call fails with a message saying so. */
class UnconfiguredProvider implements ModelProvider {
  complete(_request: ModelRequest): Promise<ModelResponse> {
    return Promise.reject(new ModelError('no model provider is configured: set RUNBOX_MODEL_BASE_URL', false));
  }
}

export function createModelProvider(config: RunboxConfig): ModelProvider {
  if (!config.RUNBOX_MODEL_BASE_URL) return new UnconfiguredProvider();
  return new OpenAiChatProvider(config.RUNBOX_MODEL_BASE_URL, config.RUNBOX_MODEL_API_KEY, config.RUNBOX_MODEL_TIMEOUT_MS);
}

@Module({
  providers: [{ provide: MODEL_PROVIDER, inject: [RUNBOX_CONFIG], useFactory: createModelProvider }],
  exports: [MODEL_PROVIDER],
})
export class ModelsModule {}
