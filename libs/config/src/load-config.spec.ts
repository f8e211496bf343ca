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
});
