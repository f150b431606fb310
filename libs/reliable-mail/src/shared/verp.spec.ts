import { describe, expect, it } from '@jest/globals';
import { readVerpAddress, verpAddress, verpCovers } from './verp.js';

const verp = { localPart: 'bounces', domain: 'bounces.example.com', secrets: ['s'.repeat(32)] };
const id = '0190f0a2-1111-7000-8000-00000000000a';
const ann = 'ann@example.org';

describe('VERP addresses', () => {
  const address = verpAddress(verp, id, ann);
  const token = address.slice('bounces+'.length, address.indexOf('@'));

  it('name the row and carry a token of 42 base32 characters: the local part fits in 64 with a 21-character prefix', () => {
    expect(address).toMatch(/^bounces\+[a-z2-7]{42}@bounces\.example\.com$/);
    expect(`${'b'.repeat(21)}+${token}`).toHaveLength(64);
    expect(verpAddress(verp, id, ann)).toBe(address);
  });

  it('differ per recipient and per row', () => {
    expect(verpAddress(verp, id, 'bob@example.org')).not.toBe(address);
    expect(verpAddress(verp, '0190f0a2-1111-7000-8000-00000000000b', ann)).not.toBe(address);
  });

  it.each([
    ['itself', () => address, id],
    ['in upper case (some servers change the case of a local part)', () => address.toUpperCase(), id],
    ['of the form before tokens: the row id alone', () => `bounces+${id}@bounces.example.com`, id],
    ['of the form before tokens, in upper case', () => `BOUNCES+${id.toUpperCase()}@Bounces.Example.com`, id],
    ['on another domain', () => address.replace('@bounces.example.com', '@example.com'), null],
    ['with another local part', () => address.replace('bounces+', 'other+'), null],
    ['with a character more', () => address.replace('@', 'a@'), null],
    ['with a character less', () => address.replace(/.@/, '@'), null],
    ['with a character outside base32', () => address.replace(/^bounces\+./, 'bounces+1'), null],
    ['whose row id is no UUID (the old form)', () => 'bounces+not-a-row@bounces.example.com', null],
    ['without a token', () => 'bounces@bounces.example.com', null],
    ['without an at sign', () => 'no-at-sign', null],
  ])('read %s names row %s', (_case, given, expected) => {
    expect(readVerpAddress(verp, given())?.rowId ?? null).toBe(expected);
  });

  it("a row id's base32 whose padding bits are not zero names no row", () => {
    // The 26th character carries the row id's last 3 bits and 2 of padding: 'b' sets a padding bit.
    const lastOfRowId = token[25];
    const padded = 'abcdefghijklmnopqrstuvwxyz234567'.indexOf(lastOfRowId) | 1;
    const spoiled = `${token.slice(0, 25)}${'abcdefghijklmnopqrstuvwxyz234567'[padded]}${token.slice(26)}`;
    expect(readVerpAddress(verp, `bounces+${spoiled}@bounces.example.com`)).toBeNull();
  });

  it('cover the recipient they were made for, and no other; an address of the old form covers nobody', () => {
    const path = readVerpAddress(verp, address.toUpperCase())!;
    expect(verpCovers(verp, path, ann)).toBe(true);
    expect(verpCovers(verp, path, 'bob@example.org')).toBe(false);
    expect(verpCovers(verp, { ...path, rowId: '0190f0a2-1111-7000-8000-00000000000b' }, ann)).toBe(false);
    expect(verpCovers(verp, readVerpAddress(verp, `bounces+${id}@bounces.example.com`)!, ann)).toBe(false);
  });

  it('rotate: signed with the newest secret, verified with any; dropped, an old secret verifies nothing', () => {
    const old = verp.secrets[0];
    const rotating = { ...verp, secrets: [old, 'n'.repeat(32)] };
    const signedNew = verpAddress(rotating, id, ann);
    expect(signedNew).not.toBe(address);
    expect(verpCovers(rotating, readVerpAddress(rotating, address)!, ann)).toBe(true);
    expect(verpCovers(rotating, readVerpAddress(rotating, signedNew)!, ann)).toBe(true);
    const rotated = { ...verp, secrets: ['n'.repeat(32)] };
    expect(verpCovers(rotated, readVerpAddress(rotated, signedNew)!, ann)).toBe(true);
    expect(verpCovers(rotated, readVerpAddress(rotated, address)!, ann)).toBe(false);
  });
});
