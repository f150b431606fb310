import { describe, expect, it } from '@jest/globals';
import { ForbiddenException, HttpException, UnauthorizedException } from '@nestjs/common';
import { ConsoleGate, CSRF_COOKIE, type ConsoleRequest } from './console-gate.js';
import { type ConsoleAuthorize, resolveConsoleOptions } from './console-options.js';

const TOKEN = 'a'.repeat(43);

function gate(authorize: ConsoleAuthorize, readOnly = false): ConsoleGate {
  return new ConsoleGate(resolveConsoleOptions('mail', { authorize, readOnly }, 'test'));
}

function request(headers: Record<string, string> = {}): ConsoleRequest {
  return {
    headers: { host: 'shop.example.com', cookie: `${CSRF_COOKIE}=${TOKEN}`, ...headers },
    socket: { remoteAddress: '127.0.0.1' },
  };
}

describe('ConsoleGate', () => {
  describe('access', () => {
    it.each([
      ['null', null],
      ['false', false],
      ['no actor', { permissions: ['view'] }],
      ['a blank actor', { actor: ' ', permissions: ['view'] }],
      ['no permissions', { actor: 'ann' }],
      ['no view', { actor: 'ann', permissions: ['act', 'content'] }],
      ['unknown permissions only', { actor: 'ann', permissions: ['admin'] }],
    ])('denies an answer of %s with 401', async (_, answer) => {
      await expect(gate(() => answer as never).access(request())).rejects.toBeInstanceOf(UnauthorizedException);
    });

    it('denies when authorize throws, and passes on an HttpException it throws', async () => {
      await expect(
        gate(() => {
          throw new Error('session store down');
        }).access(request()),
      ).rejects.toBeInstanceOf(UnauthorizedException);
      const own = new HttpException('log in first', 401);
      await expect(
        gate(() => {
          throw own;
        }).access(request()),
      ).rejects.toBe(own);
    });

    it('refuses what another site made the browser request, but a link followed from it', async () => {
      const open = gate(() => ({ actor: 'ann', permissions: ['view'] }));
      for (const site of ['cross-site', 'same-site']) {
        await expect(
          open.access({ ...request({ 'sec-fetch-site': site, 'sec-fetch-mode': 'cors' }), method: 'GET' }),
        ).rejects.toBeInstanceOf(ForbiddenException);
        await expect(
          open.access({ ...request({ 'sec-fetch-site': site, 'sec-fetch-mode': 'navigate' }), method: 'POST' }),
        ).rejects.toBeInstanceOf(ForbiddenException);
        await expect(
          open.access({ ...request({ 'sec-fetch-site': site, 'sec-fetch-mode': 'navigate' }), method: 'GET' }),
        ).resolves.toMatchObject({ actor: 'ann' });
      }
    });

    it.each([
      ['localhost:3000', true],
      ['127.0.0.1', true],
      ['[::1]:3000', true],
      ['LOCALHOST', true],
      ['shop.example.com', false],
      ['192.168.1.20:3000', false],
      ['localhost.evil.example', false],
      ['', false],
    ])('without authorize, answers on host %j: %s', async (host, answered) => {
      const open = new ConsoleGate(resolveConsoleOptions('mail', { allowUnauthenticated: true }, 'test'));
      const access = open.access(request({ host }));
      if (answered) await expect(access).resolves.toMatchObject({ actor: 'anonymous' });
      else await expect(access).rejects.toBeInstanceOf(ForbiddenException);
    });

    it.each([
      ['127.0.0.1', true],
      ['127.8.9.10', true],
      ['::1', true],
      ['::ffff:127.0.0.1', true],
      ['192.168.1.20', false],
      ['::ffff:192.168.1.20', false],
      ['fe80::1', false],
      [undefined, false],
    ])('without authorize, answers a request from %j (Host localhost): %s', async (peer, answered) => {
      const open = new ConsoleGate(resolveConsoleOptions('mail', { allowUnauthenticated: true }, 'test'));
      const express = open.access({ ...request({ host: 'localhost:3000' }), socket: { remoteAddress: peer } });
      const fastify = open.access({
        ...request({ host: 'localhost:3000' }),
        socket: undefined,
        raw: { socket: { remoteAddress: peer } },
      });
      for (const access of [express, fastify]) {
        if (answered) await expect(access).resolves.toMatchObject({ actor: 'anonymous' });
        else await expect(access).rejects.toBeInstanceOf(ForbiddenException);
      }
    });

    it('keeps only the known permissions', async () => {
      const access = await gate(async () => ({ actor: 'ann', permissions: ['view', 'root' as never] })).access(
        request(),
      );
      expect(access).toEqual({ actor: 'ann', permissions: ['view'] });
    });

    it('lets act only who may act, and no one in a read-only console', async () => {
      const viewer = gate(() => ({ actor: 'ann', permissions: ['view'] }));
      await expect(viewer.actor(request())).rejects.toBeInstanceOf(ForbiddenException);
      const operator = { actor: 'bob', permissions: ['view', 'act'] as const };
      await expect(gate(() => operator).actor(request())).resolves.toEqual(operator);
      await expect(gate(() => operator, true).actor(request())).rejects.toBeInstanceOf(ForbiddenException);
    });
  });

  describe('checkCsrf', () => {
    const check = (headers: Record<string, string>, submitted: unknown) =>
      gate(() => null).checkCsrf(request(headers), submitted);

    it('accepts the cookie’s token repeated in the form, from the same origin', () => {
      expect(() => check({}, TOKEN)).not.toThrow();
      expect(() => check({ 'sec-fetch-site': 'same-origin', origin: 'https://shop.example.com' }, TOKEN)).not.toThrow();
    });

    it.each([
      ['no token', {}, undefined],
      ['another token', {}, 'b'.repeat(43)],
      ['a token of another length', {}, TOKEN.slice(1)],
      ['no cookie', { cookie: '' }, TOKEN],
      ['a cross-site post', { 'sec-fetch-site': 'cross-site' }, TOKEN],
      ['a post from a sibling subdomain', { 'sec-fetch-site': 'same-site' }, TOKEN],
      ['another origin', { origin: 'https://evil.example' }, TOKEN],
      ['an opaque origin', { origin: 'null' }, TOKEN],
    ])('refuses %s with 403', (_, headers, submitted) => {
      expect(() => check(headers as Record<string, string>, submitted)).toThrow(ForbiddenException);
    });
  });

  describe('csrfToken', () => {
    it('keeps a browser’s token, and gives one that has none in a cookie only this console’s path gets', () => {
      const set: string[] = [];
      const response = { header: (_: string, value: string) => set.push(value) };
      const keeper = gate(() => null);
      expect(keeper.csrfToken(request(), response, '/mail')).toBe(TOKEN);
      expect(set).toEqual([]);
      const token = keeper.csrfToken(request({ cookie: '' }), response, '/api/mail');
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(set).toEqual([`${CSRF_COOKIE}=${token}; Path=/api/mail; HttpOnly; SameSite=Strict`]);
    });
  });
});

describe('resolveConsoleOptions', () => {
  it('refuses a console without authorize, unless allowUnauthenticated outside production', () => {
    expect(() => resolveConsoleOptions('mail', {}, 'development')).toThrow(/needs authorize/);
    expect(resolveConsoleOptions('mail', { allowUnauthenticated: true }, 'development').readOnly).toBe(false);
    expect(() => resolveConsoleOptions('mail', { allowUnauthenticated: true }, 'production')).toThrow(
      /refused when NODE_ENV is production/,
    );
  });

  it('refuses a path or a figure it cannot use', () => {
    const authorize = () => null;
    expect(() => resolveConsoleOptions('mail?x', { authorize }, 'test')).toThrow(/console path/);
    expect(() => resolveConsoleOptions('mail', { authorize, refreshIntervalMs: 10 }, 'test')).toThrow(
      /refreshIntervalMs/,
    );
    expect(resolveConsoleOptions('/ops/mail/', { authorize }, 'test').path).toBe('ops/mail');
  });
});
