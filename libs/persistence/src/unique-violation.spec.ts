import { Prisma } from '@prisma/client';
import { DatabaseError } from 'pg';
import { isUniqueViolation } from './unique-violation';

function known(code: string, meta?: Record<string, unknown>): Prisma.PrismaClientKnownRequestError {
  return new Prisma.PrismaClientKnownRequestError('refused', { code, clientVersion: 'test', meta });
}

describe('isUniqueViolation', () => {
  it('knows a unique index refusal from an ORM statement and from raw SQL', () => {
    expect(isUniqueViolation(known('P2002'))).toBe(true);
    expect(isUniqueViolation(known('P2010', { driverAdapterError: { cause: { kind: 'UniqueConstraintViolation' } } }))).toBe(true);
  });

  it('knows the refusal as pg reports it (raw SQL outside Prisma)', () => {
    const refused = (code: string) => Object.assign(new DatabaseError('duplicate key value violates unique constraint', 100, 'error'), { code });
    expect(isUniqueViolation(refused('23505'))).toBe(true);
    expect(isUniqueViolation(refused('23503'))).toBe(false);
  });

  it('takes no other error for one', () => {
    expect(isUniqueViolation(known('P2010', { driverAdapterError: { cause: { kind: 'ForeignKeyConstraintViolation' } } }))).toBe(false);
    expect(isUniqueViolation(known('P2003'))).toBe(false);
    expect(isUniqueViolation(Object.assign(new Error('duplicate'), { code: 'P2002' }))).toBe(false);
  });
});
