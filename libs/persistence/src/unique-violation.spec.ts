import { Prisma } from '@prisma/client';
import { isUniqueViolation } from './unique-violation';

function known(code: string, meta?: Record<string, unknown>): Prisma.PrismaClientKnownRequestError {
  return new Prisma.PrismaClientKnownRequestError('refused', { code, clientVersion: 'test', meta });
}

describe('isUniqueViolation', () => {
  it('knows a unique index refusal from an ORM statement and from raw SQL', () => {
    expect(isUniqueViolation(known('P2002'))).toBe(true);
    expect(isUniqueViolation(known('P2010', { driverAdapterError: { cause: { kind: 'UniqueConstraintViolation' } } }))).toBe(true);
  });

  it('takes no other error for one', () => {
    expect(isUniqueViolation(known('P2010', { driverAdapterError: { cause: { kind: 'ForeignKeyConstraintViolation' } } }))).toBe(false);
    expect(isUniqueViolation(known('P2003'))).toBe(false);
    expect(isUniqueViolation(Object.assign(new Error('duplicate'), { code: 'P2002' }))).toBe(false);
  });
});
