import { databasePoolSizes } from './database-pools';
import { loadConfig } from './load-config';

describe('databasePoolSizes', () => {
  it('sizes a gateway’s tenant pool from its run workers, an executor’s at 10', () => {
    expect(databasePoolSizes(loadConfig({}), 'gateway')).toEqual({ tenant: 20, system: 4 });
    expect(databasePoolSizes(loadConfig({ RUNBOX_RUN_WORKERS: '64' }), 'gateway')).toEqual({ tenant: 36, system: 4 });
    expect(databasePoolSizes(loadConfig({}), 'executor')).toEqual({ tenant: 10, system: 4 });
  });

  it('takes the sizes that are set', () => {
    const config = loadConfig({ DATABASE_POOL_SIZE: '7', DATABASE_SYSTEM_POOL_SIZE: '2' });
    expect(databasePoolSizes(config, 'gateway')).toEqual({ tenant: 7, system: 2 });
    expect(databasePoolSizes(config, 'executor')).toEqual({ tenant: 7, system: 2 });
  });

  it('refuses a pool of no connections', () => {
    expect(() => loadConfig({ DATABASE_POOL_SIZE: '0' })).toThrow(/DATABASE_POOL_SIZE/);
  });
});
