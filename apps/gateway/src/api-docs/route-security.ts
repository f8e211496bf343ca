import { CanActivate, Type } from '@nestjs/common';
import { GUARDS_METADATA } from '@nestjs/common/constants';
import { ErrorCode } from '@app/errors';
import { AdminGuard } from '../auth/admin.guard';
import { ApiKeyGuard } from '../auth/api-key.guard';
import type { CatalogueRoute } from '../common/validation/route-catalogue';

export interface SecurityScheme {
  /** Its name under components.securitySchemes. */
  name: string;
  scheme: Record<string, unknown>;
  /** What a request this guard refuses is answered with. */
  errors: ErrorCode[];
}

/**
 * The guards a route can carry, as the document describes them. A guard missing here stops
 * the document from building (naming the route), so a new way in is described before it ships.
 */
const SCHEMES = new Map<Type<CanActivate>, SecurityScheme>([
  [
    ApiKeyGuard,
    {
      name: 'apiKey',
      scheme: {
        type: 'http',
        scheme: 'bearer',
        description: "A tenant's API key (`Authorization: Bearer rbx_...`); the key decides the tenant. Unknown, revoked and malformed keys all get the same 401.",
      },
      errors: [ErrorCode.Unauthorized],
    },
  ],
  [
    AdminGuard,
    {
      name: 'adminToken',
      scheme: {
        type: 'http',
        scheme: 'bearer',
        description: 'The deployment\'s admin token (RUNBOX_ADMIN_TOKEN). Without one configured, admin routes answer 403.',
      },
      errors: [ErrorCode.Unauthorized, ErrorCode.Forbidden],
    },
  ],
]);

export const SECURITY_SCHEMES: readonly SecurityScheme[] = [...SCHEMES.values()];

/** The schemes guarding a route (none: it is public). */
export function securityOf(route: CatalogueRoute): SecurityScheme[] {
  const fn = (route.controller.prototype as Record<string, object>)[route.handler];
  const guards = [
    ...((Reflect.getMetadata(GUARDS_METADATA, route.controller) ?? []) as Array<Type<CanActivate>>),
    ...((Reflect.getMetadata(GUARDS_METADATA, fn) ?? []) as Array<Type<CanActivate>>),
  ];
  return guards.map((guard) => {
    const scheme = SCHEMES.get(guard);
    if (!scheme) throw new Error(`${route.method} ${route.path} is guarded by ${guard.name}, which the API document does not know: add it to api-docs/route-security.ts`);
    return scheme;
  });
}
