import { isDatabaseUnavailable } from './database-unavailable';

describe('isDatabaseUnavailable', () => {
  it('recognises a database that is stopped, restarting or dropped the connection', () => {
    expect(isDatabaseUnavailable(new Error('connect ECONNREFUSED 127.0.0.1:5432'))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('x'), { code: 'P1001' }))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }))).toBe(true);
    expect(isDatabaseUnavailable(new Error('the database system is starting up'))).toBe(true);
    // pg: a full pool's wait ran out, or a new connection did not open in time.
    expect(isDatabaseUnavailable(new Error('timeout exceeded when trying to connect'))).toBe(true);
    expect(isDatabaseUnavailable(new Error('timeout expired'))).toBe(true);
    expect(isDatabaseUnavailable(new Error('query failed', { cause: new Error('Connection terminated unexpectedly') }))).toBe(true);
    // The Prisma driver adapter's shape: a DriverAdapterError whose cause names the kind.
    expect(isDatabaseUnavailable(Object.assign(new Error('adapter'), { cause: { kind: 'DatabaseNotReachable' } }))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('adapter'), { cause: { kind: 'postgres', originalCode: '57P03' } }))).toBe(true);
  });

  it('leaves query errors and bugs alone', () => {
    expect(isDatabaseUnavailable(Object.assign(new Error('unique'), { code: 'P2002' }))).toBe(false);
    expect(isDatabaseUnavailable(Object.assign(new Error('adapter'), { cause: { kind: 'UniqueConstraintViolation' } }))).toBe(false);
    expect(isDatabaseUnavailable(new TypeError("Cannot read properties of undefined (reading 'x')"))).toBe(false);
    expect(isDatabaseUnavailable(undefined)).toBe(false);
  });
});
