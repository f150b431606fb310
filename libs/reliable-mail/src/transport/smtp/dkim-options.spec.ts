import { generateKeyPairSync, KeyObject } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { InvalidOptionsError } from '../../errors.js';
import { resolveSmtpOptions } from './smtp-transport-options.js';

const rsaKey = (modulusLength: number) =>
  generateKeyPairSync('rsa', { modulusLength }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
const privateKey = rsaKey(2048);
const valid = { domainName: 'example.com', keySelector: 's2026a', privateKey };

const resolvedDkim = (dkim: unknown) => resolveSmtpOptions({ host: 'smtp.example.com', dkim }, 'transport').dkim;

function refusal(dkim: unknown): unknown {
  try {
    resolvedDkim(dkim);
  } catch (error) {
    return error;
  }
  throw new Error('the options were taken');
}

describe('the SMTP transport’s dkim option', () => {
  it('reads the key once, and keeps the domain and selector as DNS names in lower case', () => {
    const dkim = resolvedDkim({ ...valid, domainName: 'Mail.Example.COM', keySelector: 'S2026A' });
    expect(dkim).toMatchObject({ domainName: 'mail.example.com', keySelector: 's2026a' });
    expect(dkim?.privateKey).toBeInstanceOf(KeyObject);
  });

  it.each([
    { what: 'a key of 1024 bits', dkim: { ...valid, privateKey: rsaKey(1024) } },
    {
      what: 'a PKCS#1 key as a Buffer',
      dkim: {
        ...valid,
        privateKey: Buffer.from(
          generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs1', format: 'pem' }),
        ),
      },
    },
    { what: 'a selector of several labels', dkim: { ...valid, keySelector: 'mail.s2026-a' } },
    { what: 'the fields to sign, From among them', dkim: { ...valid, headerFieldNames: 'From:To:Subject:Date' } },
    { what: 'fields to leave out', dkim: { ...valid, skipFields: 'Message-ID:Date' } },
  ])('takes $what', ({ dkim }) => {
    expect(() => resolvedDkim(dkim)).not.toThrow();
  });

  it('an IDN domain signs as its A-labels', () => {
    expect(resolvedDkim({ ...valid, domainName: 'bücher.example' })?.domainName).toBe('xn--bcher-kva.example');
  });

  const publicKey = generateKeyPairSync('rsa', { modulusLength: 1024 })
    .publicKey.export({ type: 'spki', format: 'pem' })
    .toString();
  const encrypted = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({
    type: 'pkcs8',
    format: 'pem',
    cipher: 'aes-256-cbc',
    passphrase: 'secret',
  }) as string;
  const ed25519 = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;

  it.each([
    { what: 'no object', dkim: 'example.com', option: 'transport.dkim', reason: /domainName, keySelector, privateKey/ },
    { what: 'an array', dkim: [valid], option: 'transport.dkim', reason: /domainName, keySelector, privateKey/ },
    { what: 'several keys', dkim: { ...valid, keys: [valid] }, option: 'transport.dkim.keys', reason: /one key signs/ },
    {
      what: 'a hash algorithm',
      dkim: { ...valid, hashAlgo: 'sha1' },
      option: 'transport.dkim.hashAlgo',
      reason: /rsa-sha256/,
    },
    {
      what: 'an unknown key',
      dkim: { ...valid, selector: 's1' },
      option: 'transport.dkim.selector',
      reason: /not a DKIM option/,
    },
    {
      what: 'no domain',
      dkim: { ...valid, domainName: undefined },
      option: 'transport.dkim.domainName',
      reason: /signing domain/,
    },
    {
      what: 'an empty domain',
      dkim: { ...valid, domainName: ' ' },
      option: 'transport.dkim.domainName',
      reason: /signing domain/,
    },
    {
      what: 'a domain of one label',
      dkim: { ...valid, domainName: 'localhost' },
      option: 'transport.dkim.domainName',
      reason: /domain name/,
    },
    {
      what: 'an address for a domain',
      dkim: { ...valid, domainName: 'shop@example.com' },
      option: 'transport.dkim.domainName',
      reason: /domain name/,
    },
    {
      what: 'a domain with a trailing dot',
      dkim: { ...valid, domainName: 'example.com.' },
      option: 'transport.dkim.domainName',
      reason: /domain name/,
    },
    {
      what: 'no selector',
      dkim: { ...valid, keySelector: undefined },
      option: 'transport.dkim.keySelector',
      reason: /DNS labels/,
    },
    {
      what: 'an empty selector',
      dkim: { ...valid, keySelector: '' },
      option: 'transport.dkim.keySelector',
      reason: /DNS labels/,
    },
    {
      what: 'a selector with an underscore',
      dkim: { ...valid, keySelector: 's_1' },
      option: 'transport.dkim.keySelector',
      reason: /DNS labels/,
    },
    {
      what: 'a selector with a tag separator',
      dkim: { ...valid, keySelector: 's1; x=1' },
      option: 'transport.dkim.keySelector',
      reason: /DNS labels/,
    },
    {
      what: 'a selector with a leading hyphen',
      dkim: { ...valid, keySelector: '-s1' },
      option: 'transport.dkim.keySelector',
      reason: /DNS labels/,
    },
    {
      what: 'a selector too long for its DNS name',
      dkim: { ...valid, keySelector: `${'s'.repeat(60)}.`.repeat(4) + 's' },
      option: 'transport.dkim.keySelector',
      reason: /DNS labels/,
    },
    {
      what: 'no key',
      dkim: { ...valid, privateKey: undefined },
      option: 'transport.dkim.privateKey',
      reason: /PEM text of an RSA private key/,
    },
    {
      what: 'text that is no PEM',
      dkim: { ...valid, privateKey: 'my-secret' },
      option: 'transport.dkim.privateKey',
      reason: /not PEM text/,
    },
    {
      what: 'a key with its line breaks escaped',
      dkim: { ...valid, privateKey: privateKey.replaceAll('\n', '\\n') },
      option: 'transport.dkim.privateKey',
      reason: /line breaks written as \\n/,
    },
    {
      what: 'a damaged key',
      dkim: { ...valid, privateKey: privateKey.replace(/\n[A-Za-z0-9+/]{16}/, '\n') },
      option: 'transport.dkim.privateKey',
      reason: /cannot be read as a private key/,
    },
    {
      what: 'a public key',
      dkim: { ...valid, privateKey: publicKey },
      option: 'transport.dkim.privateKey',
      reason: /cannot be read as a private key/,
    },
    {
      what: 'an encrypted key',
      dkim: { ...valid, privateKey: encrypted },
      option: 'transport.dkim.privateKey',
      reason: /encrypted/,
    },
    {
      what: 'an Ed25519 key',
      dkim: { ...valid, privateKey: ed25519 },
      option: 'transport.dkim.privateKey',
      reason: /type ed25519: .* RSA key/,
    },
    {
      what: 'a 512-bit key',
      dkim: { ...valid, privateKey: rsaKey(512) },
      option: 'transport.dkim.privateKey',
      reason: /512 bits.*RFC 8301/,
    },
    {
      what: 'fields to sign without From',
      dkim: { ...valid, headerFieldNames: 'To:Subject' },
      option: 'transport.dkim.headerFieldNames',
      reason: /must include From/,
    },
    {
      what: 'fields to sign that are no names',
      dkim: { ...valid, headerFieldNames: 'From, To' },
      option: 'transport.dkim.headerFieldNames',
      reason: /separated by colons/,
    },
    {
      what: 'fields to leave out that are no string',
      dkim: { ...valid, skipFields: ['Date'] },
      option: 'transport.dkim.skipFields',
      reason: /separated by colons/,
    },
    {
      what: 'From left out',
      dkim: { ...valid, skipFields: 'Date:from' },
      option: 'transport.dkim.skipFields',
      reason: /must not include From/,
    },
  ])('refuses $what, naming the option and never showing the key', ({ dkim, option, reason }) => {
    const error = refusal(dkim);
    expect(error).toBeInstanceOf(InvalidOptionsError);
    expect(error).toMatchObject({ option, reason: expect.stringMatching(reason) });
    // Nothing of the key is ever shown, whatever went wrong with it.
    expect((error as Error).message).not.toContain(privateKey.split('\n')[2]);
  });
});
