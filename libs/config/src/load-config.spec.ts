import { configSecrets } from './config.schema';
import { loadConfig } from './load-config';

describe('loadConfig', () => {
  it('applies the documented defaults', () => {
    const config = loadConfig({});
    expect(config.PORT).toBe(8080);
    expect(config.NATS_URL).toBe('nats://127.0.0.1:4222');
    expect(config.RUNBOX_ADMIN_TOKEN).toBeUndefined();
    expect(config.RUNBOX_SANDBOX_NETWORK).toBe(false);
  });

  it('names every bad variable in one error', () => {
    expect(() => loadConfig({ PORT: 'eighty', RUNBOX_MODEL_BASE_URL: 'not a url' })).toThrow(
      /PORT.*RUNBOX_MODEL_BASE_URL|RUNBOX_MODEL_BASE_URL.*PORT/,
    );
  });

  it('treats an empty optional value as unset', () => {
    expect(loadConfig({ RUNBOX_ADMIN_TOKEN: '' }).RUNBOX_ADMIN_TOKEN).toBeUndefined();
  });

  it('refuses the local sandbox backend unless the unsafe flag is set too', () => {
    expect(() => loadConfig({ RUNBOX_SANDBOX_BACKEND: 'local' })).toThrow(/RUNBOX_SANDBOX_BACKEND=local.*RUNBOX_UNSAFE_LOCAL_BACKEND=1/);
    const config = loadConfig({ RUNBOX_SANDBOX_BACKEND: 'local', RUNBOX_UNSAFE_LOCAL_BACKEND: '1' });
    expect(config.RUNBOX_SANDBOX_BACKEND).toBe('local');
    expect(loadConfig({}).RUNBOX_SANDBOX_BACKEND).toBe('docker');
  });

  it('takes a workspace disk limit of 0 (none, by choice) or at least 16 MiB', () => {
    expect(loadConfig({}).RUNBOX_SANDBOX_DISK_MB).toBe(2048);
    expect(loadConfig({ RUNBOX_SANDBOX_DISK_MB: '0' }).RUNBOX_SANDBOX_DISK_MB).toBe(0);
    expect(loadConfig({ RUNBOX_SANDBOX_DISK_MB: '64' }).RUNBOX_SANDBOX_DISK_MB).toBe(64);
    expect(() => loadConfig({ RUNBOX_SANDBOX_DISK_MB: '8' })).toThrow(/RUNBOX_SANDBOX_DISK_MB.*at least 16/);
    expect(() => loadConfig({ RUNBOX_SANDBOX_DISK_MB: '-1' })).toThrow(/RUNBOX_SANDBOX_DISK_MB/);
  });
});

describe('configSecrets', () => {
  it('lists the admin token, the model key and real database passwords', () => {
    const config = loadConfig({
      RUNBOX_ADMIN_TOKEN: 'admin-secret',
      RUNBOX_MODEL_API_KEY: 'sk-model',
      DATABASE_URL: 'postgresql://runbox_app:s3cr%40t@db:5432/runbox',
    });
    // The default system URL's development password is its role name: not a secret.
    expect(configSecrets(config)).toEqual(['admin-secret', 'sk-model', 's3cr@t']);
  });
});
