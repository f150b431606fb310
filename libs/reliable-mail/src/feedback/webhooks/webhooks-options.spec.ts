import { describe, expect, it } from '@jest/globals';
import { InvalidOptionsError } from '../../errors.js';
import { type ReliableMailWebhooksOptions, resolveWebhooksOptions } from './webhooks-options.js';

const TOPIC = 'arn:aws:sns:eu-west-1:123456789012:ses-feedback';

describe('resolveWebhooksOptions', () => {
  it('keeps the sources and defaults the body limit to 1 MiB', () => {
    const sources = {
      ses: { topicArns: [TOPIC] },
      resend: { secret: 'whsec_abc' },
      postmark: { header: { name: 'X-Secret', value: 's' } },
    };
    expect(resolveWebhooksOptions({ sources })).toEqual({ sources, maxBodyBytes: 1_048_576 });
  });

  it('leaves out a source given as undefined (a factory without its secret)', () => {
    const sources = { resend: { secret: 'whsec_abc' }, postmark: undefined };
    expect(resolveWebhooksOptions({ sources }).sources).toEqual({ resend: { secret: 'whsec_abc' } });
  });

  it.each<[string, unknown]>([
    ['no sources', {}],
    ['an empty sources object', { sources: {} }],
    ['only undefined sources', { sources: { ses: undefined } }],
  ])('takes %s: the module may serve only the one-click unsubscribe route (checked at start)', (_case, options) => {
    expect(resolveWebhooksOptions(options as ReliableMailWebhooksOptions)).toEqual({
      sources: {},
      maxBodyBytes: 1_048_576,
    });
  });

  it.each<[string, unknown, string]>([
    ['sources that are no object', { sources: 'ses' }, 'sources'],
    ['sources as a list', { sources: ['ses'] }, 'sources'],
    ['dsn as a webhook source', { sources: { dsn: {} } }, 'sources.dsn'],
    ['ses without topics', { sources: { ses: { topicArns: [] } } }, 'sources.ses.topicArns'],
    [
      'ses with a topic that is no SNS ARN',
      { sources: { ses: { topicArns: ['ses-feedback'] } } },
      'sources.ses.topicArns',
    ],
    ['resend without a secret', { sources: { resend: { secret: [] } } }, 'sources.resend.secret'],
    ['resend with an empty secret', { sources: { resend: { secret: '' } } }, 'sources.resend.secret'],
    ['postmark with no protection', { sources: { postmark: {} } }, 'sources.postmark'],
    [
      'postmark basic auth without a password',
      { sources: { postmark: { basicAuth: { username: 'u' } } } },
      'sources.postmark.basicAuth.password',
    ],
    [
      'postmark header with a space in its name',
      { sources: { postmark: { header: { name: 'X Secret', value: 's' } } } },
      'sources.postmark.header.name',
    ],
    ['a body limit of 0', { sources: { resend: { secret: 's' } }, maxBodyBytes: 0 }, 'maxBodyBytes'],
  ])('refuses %s', (_case, options, option) => {
    let error: unknown;
    try {
      resolveWebhooksOptions(options as ReliableMailWebhooksOptions);
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(InvalidOptionsError);
    expect(error).toMatchObject({
      option,
      message: expect.stringContaining(`Invalid ReliableMailWebhooksModule option "${option}"`),
    });
  });
});
