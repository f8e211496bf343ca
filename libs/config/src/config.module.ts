import { DynamicModule, Global, Module } from '@nestjs/common';
import { RunboxConfig } from './config.schema';
import { loadConfig } from './load-config';

export const RUNBOX_CONFIG = Symbol('RUNBOX_CONFIG');

@Global()
@Module({})
export class ConfigModule {
  /** Tests pass overrides; production reads the environment once. */
  static forRoot(config: RunboxConfig = loadConfig()): DynamicModule {
    return {
      module: ConfigModule,
      providers: [{ provide: RUNBOX_CONFIG, useValue: config }],
      exports: [RUNBOX_CONFIG],
    };
  }
}
