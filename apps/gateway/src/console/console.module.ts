import { Module } from '@nestjs/common';
import { findConsoleDir, loadConsoleAssets } from './console-assets';
import { CONSOLE_ASSETS, ConsoleController } from './console.controller';

/** Serves the web console (apps/console, built into dist/console) at /console. */
@Module({
  controllers: [ConsoleController],
  providers: [{ provide: CONSOLE_ASSETS, useFactory: () => loadConsoleAssets(findConsoleDir()) }],
})
export class ConsoleModule {}
