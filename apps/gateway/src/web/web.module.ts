import { Provider, Type } from '@nestjs/common';
import { GatewayTool } from '../tools/gateway-tool';
import { BrowserPool } from './browser/browser-pool';
import { BrowserTool } from './browser/browser.tool';
import { EgressRulesRepository } from './egress-rules.repository';
import { Outbound } from './outbound';
import { WebFetchTool } from './web-fetch.tool';
import { WebSearchTool } from './web-search.tool';

/**
 * The web tools (web_fetch, web_search, browser) and what they share: the egress guard with
 * each tenant's domain rules, and the browser pool. The gateway registers WEB_TOOLS among
 * its gateway tools and provides WEB_PROVIDERS, the services they use.
 */
export const WEB_TOOLS: Array<Type<GatewayTool>> = [WebFetchTool, WebSearchTool, BrowserTool];

export const WEB_PROVIDERS: Provider[] = [EgressRulesRepository, Outbound, BrowserPool];
