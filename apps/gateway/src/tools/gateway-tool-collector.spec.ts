import { Injectable, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { z } from 'zod';
import { GatewayTool, gatewayToolProviders, GatewayToolResult, toolOutput } from './gateway-tool';
import { GatewayToolCollector } from './gateway-tool-collector';
import { ToolRegistry } from './tool-registry';

function definition(name: string): GatewayTool['definition'] {
  return { name, description: `${name} things`, parameters: z.object({}), mutating: false, toolsets: ['research'], runsIn: 'gateway', timeoutSeconds: 30 };
}

@Injectable()
class NotesTool implements GatewayTool {
  readonly definition = definition('notes');
  execute = async (): Promise<GatewayToolResult> => toolOutput('noted');
}

@Injectable()
class WeatherTool implements GatewayTool {
  readonly definition = definition('weather');
  execute = async (): Promise<GatewayToolResult> => toolOutput('sunny');
}

@Injectable()
class ClockTool implements GatewayTool {
  readonly definition = definition('clock');
  execute = async (): Promise<GatewayToolResult> => toolOutput('noon');
}

/** Two feature modules that know nothing of the registry, each contributing its tools. */
@Module({ providers: gatewayToolProviders(NotesTool, WeatherTool) })
class NotesModule {}

@Module({ providers: gatewayToolProviders(ClockTool) })
class ClockModule {}

describe('GatewayToolCollector', () => {
  it("registers every feature module's GATEWAY_TOOLS contribution beside the sandbox tools", async () => {
    const app = await Test.createTestingModule({
      imports: [DiscoveryModule, NotesModule, ClockModule],
      providers: [{ provide: ToolRegistry, useFactory: () => new ToolRegistry() }, GatewayToolCollector],
    }).compile();
    await app.init();
    const registry = app.get(ToolRegistry);

    expect(registry.gatewayTool('notes')).toBeInstanceOf(NotesTool);
    expect(registry.gatewayTool('weather')).toBeInstanceOf(WeatherTool);
    expect(registry.gatewayTool('clock')).toBeInstanceOf(ClockTool);
    expect(registry.toolset('research')).toEqual(expect.arrayContaining(['clock', 'notes', 'weather']));
    expect(registry.names()).toEqual(expect.arrayContaining(['read_file', 'terminal']));
    await app.close();
  });
});
