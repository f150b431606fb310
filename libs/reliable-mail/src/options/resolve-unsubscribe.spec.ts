import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { InvalidOptionsError } from '../errors.js';
import type { LaneOptions, ReliableMailOptions } from './reliable-mail-options.interface.js';
import { resolveOptions } from './resolve-options.js';

const secret = 'a-secret-of-at-least-32-characters!';
const url = 'https://example.com/webhooks/mail/unsubscribe';
const base: ReliableMailOptions = {
  transport: 'smtp://smtp.example.com:587',
  from: 'shop@example.com',
  messageIdDomain: 'mail.example.com',
};

const privateKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
  type: 'pkcs8',
  format: 'pem',
}) as string;
/** SMTP signing with DKIM, the fields given. */
const signing = (fields: { headerFieldNames?: string; skipFields?: string } = {}) => ({
  host: 'smtp.example.com',
  port: 587,
  dkim: { domainName: 'example.com', keySelector: 's1', privateKey, ...fields },
});

const resolve = (options: Partial<ReliableMailOptions>) => resolveOptions({ ...base, ...options }, 'host', 1);
const lanes = (lanes: Record<string, LaneOptions>) => ({ lanes: { default: {}, ...lanes } });

function refusedOption(options: Partial<ReliableMailOptions>): string {
  try {
    resolve(options);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidOptionsError);
    return (error as InvalidOptionsError).option;
  }
  throw new Error('the options were taken');
}

describe('one-click unsubscribe options', () => {
  it('lanes are transactional unless marked otherwise, and carry no unsubscribe', () => {
    const resolved = resolve({});
    expect(resolved.unsubscribe).toBeNull();
    expect(resolved.lanes.map((lane) => lane.unsubscribe)).toEqual([null, null, null]);
  });

  it("a non-transactional lane unsubscribes from its name, or the category it gives; the module's URL and secrets with it", () => {
    const resolved = resolve({
      ...lanes({ news: { transactional: false }, digest: { transactional: false, category: 'news' } }),
      unsubscribe: { url, secret: [secret, `${secret}2`] },
    });
    const byLane = Object.fromEntries(resolved.lanes.map((lane) => [lane.name, lane.unsubscribe]));
    const links = { url, secrets: [secret, `${secret}2`] };
    expect(byLane).toEqual({
      default: null,
      news: { ...links, category: 'news' },
      digest: { ...links, category: 'news' },
    });
    expect(resolved.unsubscribe).toEqual(links);
  });

  it('the URL may go to http on a loopback host (tests), and may carry parameters of its own', () => {
    for (const given of [
      'http://127.0.0.1:3000/webhooks/mail/unsubscribe',
      'http://localhost/u',
      'https://example.com/u?tenant=7',
    ])
      expect(resolve({ unsubscribe: { url: given, secret } }).unsubscribe?.url).toBe(given);
  });

  it("DKIM signing that covers the one-click headers, as nodemailer's own list does, is taken; a transactional lane may sign less", () => {
    const news = { news: { transactional: false } };
    expect(() => resolve({ ...lanes(news), transport: signing(), unsubscribe: { url, secret } })).not.toThrow();
    const headerFieldNames = 'From:To:Subject:Date:Message-ID:List-Unsubscribe:List-Unsubscribe-Post';
    expect(() =>
      resolve({ ...lanes(news), transport: signing({ headerFieldNames }), unsubscribe: { url, secret } }),
    ).not.toThrow();
    expect(() => resolve({ transport: signing({ headerFieldNames: 'From:To:Subject' }) })).not.toThrow();
  });

  it.each<{ name: string; options: Partial<ReliableMailOptions>; option: string }>([
    {
      name: 'DKIM fields that leave the one-click headers out, on a non-transactional lane',
      options: {
        ...lanes({ news: { transactional: false } }),
        transport: signing({ headerFieldNames: 'From:To:Subject' }),
        unsubscribe: { url, secret },
      },
      option: 'transport.dkim.headerFieldNames',
    },
    {
      name: 'DKIM skipping List-Unsubscribe-Post, on a non-transactional lane',
      options: {
        ...lanes({ news: { transactional: false } }),
        transport: signing({ skipFields: 'List-Unsubscribe-Post' }),
        unsubscribe: { url, secret },
      },
      option: 'transport.dkim.skipFields',
    },
    {
      name: "a non-transactional lane's own transport signing without the one-click headers",
      options: {
        ...lanes({ news: { transactional: false, transport: signing({ headerFieldNames: 'From:List-Unsubscribe' }) } }),
        unsubscribe: { url, secret },
      },
      option: 'lanes.news.transport.dkim.headerFieldNames',
    },
    {
      name: 'a non-transactional lane without unsubscribe',
      options: lanes({ news: { transactional: false } }),
      option: 'unsubscribe',
    },
    {
      name: 'transactional as a string',
      options: lanes({ news: { transactional: 'no' as never } }),
      option: 'lanes.news.transactional',
    },
    {
      name: 'a category on a transactional lane',
      options: lanes({ news: { category: 'news' } }),
      option: 'lanes.news.category',
    },
    {
      name: 'a category in upper case',
      options: { ...lanes({ news: { transactional: false, category: 'News' } }), unsubscribe: { url, secret } },
      option: 'lanes.news.category',
    },
    {
      name: 'an http URL on a public host',
      options: { unsubscribe: { url: 'http://example.com/u', secret } },
      option: 'unsubscribe.url',
    },
    {
      name: 'a relative URL',
      options: { unsubscribe: { url: '/webhooks/mail/unsubscribe', secret } },
      option: 'unsubscribe.url',
    },
    {
      name: 'a URL with a token of its own',
      options: { unsubscribe: { url: `${url}?token=x`, secret } },
      option: 'unsubscribe.url',
    },
    {
      name: 'a URL with credentials',
      options: { unsubscribe: { url: 'https://u:p@example.com/u', secret } },
      option: 'unsubscribe.url',
    },
    { name: 'a URL with a fragment', options: { unsubscribe: { url: `${url}#x`, secret } }, option: 'unsubscribe.url' },
    {
      name: 'a URL too long for a header',
      options: { unsubscribe: { url: `${url}/${'a'.repeat(400)}`, secret } },
      option: 'unsubscribe.url',
    },
    { name: 'a short secret', options: { unsubscribe: { url, secret: 'short' } }, option: 'unsubscribe.secret' },
    { name: 'no secret', options: { unsubscribe: { url, secret: [] } }, option: 'unsubscribe.secret' },
    {
      name: 'a short old secret',
      options: { unsubscribe: { url, secret: ['short', secret] } },
      option: 'unsubscribe.secret',
    },
  ])('refuses $name, naming $option', ({ options, option }) => {
    expect(refusedOption(options)).toBe(option);
  });
});
