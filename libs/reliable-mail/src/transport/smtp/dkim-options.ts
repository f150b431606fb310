import { createPrivateKey, type KeyObject } from 'node:crypto';
import { domainToASCII } from 'node:url';
import { InvalidOptionsError } from '../../errors.js';

/**
 * DKIM signing of every message the SMTP transport sends (RFC 6376, rsa-sha256, relaxed/relaxed), by nodemailer's
 * signer. The names are nodemailer's `dkim` option's, for one key: a receiver verifies the signature against the
 * public key published as a TXT record at `<keySelector>._domainkey.<domainName>`.
 *
 * To rotate the key, publish the new key under a new selector, switch `keySelector` and `privateKey` to it once its
 * record is visible, and keep the old selector's record for a week: a relay may still hold mail signed with it. Each
 * attempt signs the message again, so a retry after the switch carries the new signature.
 */
export interface DkimOptions {
  /**
   * The signing domain (`d=`). DMARC counts the signature only when the From domain is this domain or shares its
   * organizational domain (relaxed alignment; the same domain for strict): sign with the domain mail is sent from.
   */
  domainName: string;
  /** The selector (`s=`) under which the public key is published: a new one for each key, never one reused. */
  keySelector: string;
  /** The RSA private key (at least 1024 bits; 2048 recommended) as PEM text (PKCS#1 or PKCS#8), not encrypted. */
  privateKey: string | Buffer;
  /**
   * The header fields to sign, separated by colons; From must be one.
   * @default nodemailer's list: From, Sender, Reply-To, Subject, Date, Message-ID, To, Cc, MIME-Version, the
   * Content-* fields, the Resent-* fields, In-Reply-To, References and the List-* fields
   */
  headerFieldNames?: string;
  /** Header fields left out of the signature, separated by colons (a field a relay is known to rewrite). */
  skipFields?: string;
}

/** The DKIM options checked, the key parsed once. */
export interface ResolvedDkimOptions extends Omit<DkimOptions, 'privateKey'> {
  privateKey: KeyObject;
}

/** nodemailer's DKIM options that do not apply here, with why. */
const REFUSED_OPTIONS: Record<string, string> = {
  keys: 'one key signs: domainName, keySelector and privateKey (to rotate it, see docs/transports.md, DKIM)',
  hashAlgo: 'every signature is rsa-sha256 (RFC 8301 forbids signing with rsa-sha1)',
  cacheDir: 'each message is signed in memory',
  cacheTreshold: 'each message is signed in memory',
};
const ALLOWED_OPTIONS = new Set(['domainName', 'keySelector', 'privateKey', 'headerFieldNames', 'skipFields']);

/** A DNS label as RFC 1035 §2.3.1 has host names: letters, digits and inner hyphens, at most 63. */
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;
/** A header field name (RFC 5322 §3.6.8): printable US-ASCII but the colon. */
const FIELD_NAME = /^[\x21-\x39\x3b-\x7e]+$/;
/** RFC 8301 §3.2: verifiers refuse shorter RSA keys. */
const SHORTEST_KEY_BITS = 1024;

const isDnsName = (name: string): boolean => name.length <= 253 && name.split('.').every((label) => LABEL.test(label));

/** The domain in ASCII (an IDN as its A-labels), lower case. */
function signingDomain(value: unknown, option: string): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw new InvalidOptionsError(option, 'must be the signing domain, such as example.com');
  }
  const ascii = domainToASCII(value.trim());
  if (!ascii.includes('.') || !isDnsName(ascii)) {
    throw new InvalidOptionsError(option, `must be a domain name such as example.com, got ${JSON.stringify(value)}`);
  }
  return ascii.toLowerCase();
}

/** RFC 6376 §3.1: a selector is one or more DNS labels. */
function selector(value: unknown, domainName: string, option: string): string {
  if (typeof value !== 'string' || !isDnsName(value) || `${value}._domainkey.${domainName}`.length > 253) {
    throw new InvalidOptionsError(
      option,
      `must be DNS labels (letters, digits, inner hyphens, dots between), such as s2026a, got ${JSON.stringify(value)}`,
    );
  }
  return value.toLowerCase();
}

/** Why a private key could not be read, with what usually causes it; never the key itself. */
function unreadableKey(privateKey: string | Buffer, error: unknown): string {
  const text = privateKey.toString();
  if (!text.includes('-----BEGIN')) return 'is not PEM text (-----BEGIN PRIVATE KEY----- …)';
  // PKCS#8's ENCRYPTED PRIVATE KEY, PKCS#1's Proc-Type: 4,ENCRYPTED.
  if (text.includes('ENCRYPTED')) return 'is encrypted: give it decrypted';
  if (!text.includes('\n') && text.includes('\\n')) {
    return 'has its line breaks written as \\n (as an environment variable often has them): give it real line breaks';
  }
  return `cannot be read as a private key (${(error as { code?: string }).code ?? (error as Error).message})`;
}

function rsaPrivateKey(value: unknown, option: string): KeyObject {
  if ((typeof value !== 'string' && !Buffer.isBuffer(value)) || value.length === 0) {
    throw new InvalidOptionsError(option, 'must be the PEM text of an RSA private key');
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(value);
  } catch (error) {
    throw new InvalidOptionsError(option, unreadableKey(value, error));
  }
  if (key.asymmetricKeyType !== 'rsa') {
    throw new InvalidOptionsError(
      option,
      `is a key of type ${key.asymmetricKeyType}: signatures are rsa-sha256, so it must be an RSA key`,
    );
  }
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  if (bits < SHORTEST_KEY_BITS) {
    throw new InvalidOptionsError(
      option,
      `is ${bits} bits: receivers refuse RSA keys under ${SHORTEST_KEY_BITS} bits (RFC 8301); use 2048`,
    );
  }
  return key;
}

/** A colon-separated list of header field names, as nodemailer takes it; the names lower case. */
function fieldNames(value: unknown, option: string): string[] | undefined {
  if (value === undefined) return undefined;
  const names = typeof value === 'string' ? value.split(':').map((name) => name.trim().toLowerCase()) : [];
  if (names.length === 0 || !names.every((name) => FIELD_NAME.test(name))) {
    throw new InvalidOptionsError(
      option,
      `must be header field names separated by colons, such as From:To:Subject, got ${JSON.stringify(value)}`,
    );
  }
  return names;
}

/** Checks `dkim` and reads its key, so that a key that cannot sign stops the start rather than the first mail. */
export function resolveDkimOptions(dkim: unknown, option: string): ResolvedDkimOptions {
  if (!dkim || typeof dkim !== 'object' || Array.isArray(dkim)) {
    throw new InvalidOptionsError(option, 'must be { domainName, keySelector, privateKey }');
  }
  const options = dkim as Record<string, unknown>;
  for (const key of Object.keys(options)) {
    if (REFUSED_OPTIONS[key]) throw new InvalidOptionsError(`${option}.${key}`, `is not used: ${REFUSED_OPTIONS[key]}`);
    if (!ALLOWED_OPTIONS.has(key)) throw new InvalidOptionsError(`${option}.${key}`, 'is not a DKIM option');
  }
  const domainName = signingDomain(options.domainName, `${option}.domainName`);
  const headerFieldNames = fieldNames(options.headerFieldNames, `${option}.headerFieldNames`);
  const skipFields = fieldNames(options.skipFields, `${option}.skipFields`);
  // RFC 6376 §5.4: the From header field MUST be signed.
  if (headerFieldNames && !headerFieldNames.includes('from')) {
    throw new InvalidOptionsError(`${option}.headerFieldNames`, 'must include From (RFC 6376 §5.4)');
  }
  if (skipFields?.includes('from')) {
    throw new InvalidOptionsError(`${option}.skipFields`, 'must not include From: it is always signed (RFC 6376 §5.4)');
  }
  return {
    domainName,
    keySelector: selector(options.keySelector, domainName, `${option}.keySelector`),
    privateKey: rsaPrivateKey(options.privateKey, `${option}.privateKey`),
    ...(headerFieldNames ? { headerFieldNames: headerFieldNames.join(':') } : {}),
    ...(skipFields ? { skipFields: skipFields.join(':') } : {}),
  };
}
