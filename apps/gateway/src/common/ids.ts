import { AppError } from '@app/errors';
import { ID_PATTERN } from '@app/persistence';

/**
 * Path ids: a malformed one cannot name anything, so it is answered like a missing one
 * (404), the same as another tenant's id.
 */
export function pathId(what: string, id: string): string {
  if (!ID_PATTERN.test(id)) throw AppError.notFound(what, truncateForMessage(id));
  return id;
}

function truncateForMessage(id: string): string {
  return id.length > 64 ? `${id.slice(0, 64)}…` : id;
}
