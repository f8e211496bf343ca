import { Prisma } from '@prisma/client';
import { DatabaseError } from 'pg';

/**
 * A unique index refused the row: P2002 from an ORM statement, P2010 naming the violation
 * from Prisma's raw SQL, SQLSTATE 23505 from pg itself (PrismaService.tenantSql).
 */
export function isUniqueViolation(err: unknown): boolean {
  if (err instanceof DatabaseError) return err.code === '23505';
  if (!(err instanceof Prisma.PrismaClientKnownRequestError)) return false;
  if (err.code === 'P2002') return true;
  const adapterError = err.meta?.driverAdapterError as { cause?: { kind?: unknown } } | undefined;
  return err.code === 'P2010' && adapterError?.cause?.kind === 'UniqueConstraintViolation';
}
