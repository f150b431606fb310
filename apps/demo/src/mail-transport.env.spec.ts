import { describe, expect, it } from '@jest/globals';
import { EmlFileTransport, PostmarkMailTransport, ResendMailTransport, SesMailTransport } from '@reliable-mail/nestjs';
import { providerFromEnv } from './mail-transport.env.js';

describe('providerFromEnv: MAIL_TRANSPORT chooses what the demo sends through', () => {
  it.each([
    { env: {}, expected: null },
    { env: { MAIL_TRANSPORT: 'smtp', RESEND_API_KEY: 're_1' }, expected: null },
    { env: { MAIL_TRANSPORT: 'ses', AWS_REGION: 'eu-west-1' }, expected: SesMailTransport },
    { env: { MAIL_TRANSPORT: 'postmark', POSTMARK_SERVER_TOKEN: 'token' }, expected: PostmarkMailTransport },
    { env: { MAIL_TRANSPORT: 'resend', RESEND_API_KEY: 're_1' }, expected: ResendMailTransport },
    { env: { MAIL_TRANSPORT: 'file' }, expected: EmlFileTransport },
  ])('$env', ({ env, expected }) => {
    const choice = providerFromEnv(env);
    if (expected === null) expect(choice).toBeNull();
    else expect(choice?.transport).toBeInstanceOf(expected);
  });

  it.each([
    { env: { MAIL_TRANSPORT: 'ses' }, message: 'MAIL_TRANSPORT=ses needs AWS_REGION' },
    { env: { MAIL_TRANSPORT: 'postmark' }, message: 'MAIL_TRANSPORT=postmark needs POSTMARK_SERVER_TOKEN' },
    { env: { MAIL_TRANSPORT: 'resend', RESEND_API_KEY: ' ' }, message: 'MAIL_TRANSPORT=resend needs RESEND_API_KEY' },
    { env: { MAIL_TRANSPORT: 'sendgrid' }, message: 'MAIL_TRANSPORT must be smtp, ses, postmark, resend or file' },
  ])('$env: $message', ({ env, message }) => {
    expect(() => providerFromEnv(env)).toThrow(message);
  });
});
