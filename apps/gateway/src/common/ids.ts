import { AppError, ErrorCode } from '@app/errors';
import { ID_PATTERN } from '@app/persistence';

/**
 * Path ids: a malformed one cannot name anything, so it is answered like a missing one
 * (404), the same as another tenant's id. It is not echoed back: whatever was sent in its
 * place (a pasted key, say) stays out of the answer.
 */
export function pathId(what: string, id: string): string {
  if (!ID_PATTERN.test(id)) throw new AppError(ErrorCode.NotFound, `${what} not found (not a valid id)`);
  return id;
}
