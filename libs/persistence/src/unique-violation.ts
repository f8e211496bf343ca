import { Prisma } from '@prisma/client';

/** A unique index refused the row: P2002 from an ORM statement, P2010 naming the violation from raw SQL. */
export function isUniqueViolation(err: unknown): boolean {
  if (!(err instanceof Prisma.PrismaClientKnownRequestError)) return false;
  if (err.code === 'P2002') return true;
  const adapterError = err.meta?.driverAdapterError as { cause?: { kind?: unknown } } | undefined;
  return err.code === 'P2010' && adapterError?.cause?.kind === 'UniqueConstraintViolation';
}
