import { describe, expect, it } from '@jest/globals';
import { bootstrap, readEnvironment } from './main.js';

describe('main: the shop reads its environment', () => {
  it('defaults to port 3000 and SMTP, and treats empty variables as unset', () => {
    expect(readEnvironment({ DATABASE_URL: '', SMTP_URL: 'smtp://127.0.0.1:2525' })).toMatchObject({
      port: 3000,
      databaseUrl: undefined,
      smtpUrl: 'smtp://127.0.0.1:2525',
      provider: null,
      logLevels: ['fatal', 'error', 'warn', 'log'],
    });
  });

  it('refuses a PORT that is not a port number', () => {
    expect(() => readEnvironment({ PORT: '70000' })).toThrow('PORT must be a port number, got "70000"');
  });

  it.each([
    { env: { SMTP_URL: 'smtp://127.0.0.1:2525' }, message: 'DATABASE_URL is not set' },
    { env: { DATABASE_URL: 'postgres://127.0.0.1/shop' }, message: 'SMTP_URL is not set, nor MAIL_TRANSPORT' },
  ])('$env: bootstrap refuses, $message', async ({ env, message }) => {
    await expect(bootstrap(env)).rejects.toThrow(`Start-up failed while reading the environment: ${message}`);
  });
});
