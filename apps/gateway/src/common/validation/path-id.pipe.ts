import { PipeTransform } from '@nestjs/common';
import { AppError, ErrorCode } from '@app/errors';
import { ID_PATTERN } from '@app/persistence';

/**
 * A path id: a malformed one cannot name anything, so it is answered like a missing one
 * (404), the same as another tenant's id. It is not echoed back: whatever was sent in its
 * place (a pasted key, say) stays out of the answer.
 */
export class PathIdPipe implements PipeTransform<string, string> {
  readonly pattern = ID_PATTERN;

  constructor(
    /** What the id names, for the message and for tests that need a real one: `run`, `api key`. */
    readonly kind: string,
  ) {}

  transform(id: string): string {
    if (!this.pattern.test(id)) throw new AppError(ErrorCode.NotFound, `${this.kind} not found (not a valid id)`);
    return id;
  }
}
