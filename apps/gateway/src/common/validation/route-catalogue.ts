import { INestApplicationContext, RequestMethod, Type } from '@nestjs/common';
import { METHOD_METADATA, PATH_METADATA, ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import { ModulesContainer } from '@nestjs/core';
import { ZodType } from 'zod';
import { PathIdPipe } from './path-id.pipe';
import { ZodValidationOptions, ZodValidationPipe } from './zod-validation.pipe';

/** What one handler validates, read from its parameter decorators. */
export interface RouteParts {
  body?: { schema: ZodType; options: ZodValidationOptions };
  query?: ZodType;
  /** Path parameters that are not ids, by name. */
  params: Record<string, ZodType>;
  /** `:id`-style parameters, by name, with what they name. */
  ids: Record<string, string>;
  headers: Record<string, ZodType>;
}

export interface CatalogueRoute extends RouteParts {
  method: string;
  /** Express-style: `/v1/runs/:id/events`. */
  path: string;
  /** Where the route is declared, for metadata beside the handler (its operation, guards). */
  controller: Type;
  handler: string;
}

interface ParamMetadata {
  data?: unknown;
  pipes?: unknown[];
}

/** The schemas a handler's parameters carry. */
export function routeParts(controller: Type, handler: string): RouteParts {
  const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, controller, handler) ?? {}) as Record<string, ParamMetadata>;
  const parts: RouteParts = { params: {}, ids: {}, headers: {} };
  for (const param of Object.values(args)) {
    for (const pipe of param.pipes ?? []) {
      if (pipe instanceof PathIdPipe && typeof param.data === 'string') parts.ids[param.data] = pipe.kind;
      if (!(pipe instanceof ZodValidationPipe)) continue;
      const { part, schema } = pipe as ZodValidationPipe;
      if (part === 'body') parts.body = { schema, options: pipe.options };
      else if (part === 'query') parts.query = schema;
      else if (part === 'path' && typeof param.data === 'string') parts.params[param.data] = schema;
      else if (part.startsWith('header.')) parts.headers[part.slice('header.'.length)] = schema;
    }
  }
  return parts;
}

/** Every HTTP route of the app with what it validates: the fuzz test's and the API document's map of the API. */
export function routeCatalogue(app: INestApplicationContext): CatalogueRoute[] {
  return routesOf(app.get(ModulesContainer));
}

/** The same, from inside the app (a provider can inject ModulesContainer). */
export function routesOf(modules: ModulesContainer): CatalogueRoute[] {
  const routes: CatalogueRoute[] = [];
  for (const module of modules.values()) {
    for (const wrapper of module.controllers.values()) {
      const controller = wrapper.metatype as Type | null;
      if (!controller) continue;
      const base = String(Reflect.getMetadata(PATH_METADATA, controller) ?? '');
      for (const handler of Object.getOwnPropertyNames(controller.prototype)) {
        const fn = (controller.prototype as Record<string, unknown>)[handler];
        if (handler === 'constructor' || typeof fn !== 'function') continue;
        const path = Reflect.getMetadata(PATH_METADATA, fn) as string | undefined;
        const method = Reflect.getMetadata(METHOD_METADATA, fn) as RequestMethod | undefined;
        if (path === undefined || method === undefined) continue;
        const full = `/${[base, path].map((p) => p.replace(/^\/+|\/+$/g, '')).filter(Boolean).join('/')}`;
        routes.push({ method: RequestMethod[method], path: full, controller, handler, ...routeParts(controller, handler) });
      }
    }
  }
  return routes.sort((a, b) => a.path.localeCompare(b.path) || a.method.localeCompare(b.method));
}
