import { isTransientInfrastructureError } from './run-context';

describe('isTransientInfrastructureError', () => {
  it('recognises an unreachable database or broker, also as a cause', () => {
    expect(isTransientInfrastructureError(new Error('connect ECONNREFUSED 127.0.0.1:5432'))).toBe(true);
    expect(isTransientInfrastructureError(Object.assign(new Error('x'), { code: 'P1001' }))).toBe(true);
    expect(isTransientInfrastructureError(new Error('query failed', { cause: new Error('Connection terminated unexpectedly') }))).toBe(true);
  });

  it('treats anything else as the run’s own failure', () => {
    expect(isTransientInfrastructureError(new TypeError("Cannot read properties of undefined (reading 'x')"))).toBe(false);
    expect(isTransientInfrastructureError(Object.assign(new Error('unique'), { code: 'P2002' }))).toBe(false);
    expect(isTransientInfrastructureError(undefined)).toBe(false);
  });
});
