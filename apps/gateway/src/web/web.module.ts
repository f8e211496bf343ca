import { Module } from '@nestjs/common';
import { gatewayToolProviders } from '../tools/gateway-tool';
import { ToolsModule } from '../tools/tools.module';
import { BrowserPool } from './browser/browser-pool';
import { BrowserSettingsRepository } from './browser/browser-settings.repository';
import { BrowserTool } from './browser/browser.tool';
import { EgressRulesRepository } from './egress-rules.repository';
import { Outbound } from './outbound';
import { WebFetchTool } from './web-fetch.tool';
import { WebSearchTool } from './web-search.tool';

/**
 * The web tools (web_fetch, web_search, browser) and what they share: the egress guard with
 * each tenant's domain rules, and the browser pool. Sessions close a deleted session's
 * browser context; the admin API edits the domain rules.
 */
@Module({
  imports: [ToolsModule],
  providers: [EgressRulesRepository, Outbound, BrowserPool, BrowserSettingsRepository, ...gatewayToolProviders(WebFetchTool, WebSearchTool, BrowserTool)],
  exports: [EgressRulesRepository, Outbound, BrowserPool],
})
export class WebModule {}
