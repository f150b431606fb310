import { randomBytes, timingSafeEqual } from 'node:crypto';
import { ForbiddenException, HttpException, UnauthorizedException } from '@nestjs/common';
import { CONSOLE_PERMISSIONS, type ConsoleAccess, type ConsolePermission } from './console-options.js';
import type { ResolvedConsoleOptions } from './console-options.js';

/** What the console reads of a request and writes to a response, the same on Express and Fastify. */
export interface ConsoleRequest {
  headers: Record<string, string | string[] | undefined>;
  method?: string;
  protocol?: string;
  /** Express's, and Fastify's (which also has `raw`, Node's request): where the request came from. */
  socket?: { remoteAddress?: string };
  raw?: { socket?: { remoteAddress?: string } };
}
export interface ConsoleResponse {
  header(name: string, value: string): unknown;
}

export const CSRF_COOKIE = 'reliable_mail_console_csrf';
export const CSRF_FIELD = '_csrf';

function header(request: ConsoleRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function cookie(request: ConsoleRequest, name: string): string | undefined {
  for (const part of (header(request, 'cookie') ?? '').split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) return value.join('=');
  }
  return undefined;
}

/** The host of an `Origin` header; null for `null` (a sandboxed or privacy-sensitive origin) and for anything else. */
function hostOf(origin: string): string | null {
  try {
    return new URL(origin).host;
  } catch {
    return null;
  }
}

function sameText(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/**
 * A request another site made the browser send, other than following a link to a page: an app that allows
 * credentialed CORS for its API would otherwise let that site read the console's pages (and their CSRF token).
 */
function refuseCrossSiteReads(request: ConsoleRequest): void {
  const site = header(request, 'sec-fetch-site');
  if (site !== 'cross-site' && site !== 'same-site') return;
  if (header(request, 'sec-fetch-mode') === 'navigate' && request.method === 'GET') return;
  throw new ForbiddenException(`refused: a request another site made (Sec-Fetch-Site: ${site})`);
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/** 127.0.0.0/8 and ::1, also as IPv4-mapped IPv6 (`::ffff:127.0.0.1`, what a dual-stack socket reports). */
function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  return address === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4);
}

/**
 * A console open to anyone answers only a request from this machine, made to a loopback name. From another
 * machine, anyone on the network would have every permission (an app listening on every interface, as
 * `app.listen(3000)` does); to another name, it may be a DNS rebinding, where a page of another site becomes
 * same-origin with it. An unknown peer is refused.
 */
function refuseNonLoopback(request: ConsoleRequest): void {
  const peer = request.socket?.remoteAddress ?? request.raw?.socket?.remoteAddress;
  if (!isLoopbackAddress(peer)) {
    throw new ForbiddenException(
      `refused: a console without authorize answers requests from this machine only, not from ${peer ?? 'an unknown peer'}`,
    );
  }
  const host = header(request, 'host') ?? '';
  const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':')[0];
  if (!LOOPBACK_HOSTS.has(name.toLowerCase())) {
    throw new ForbiddenException(
      `refused: a console without authorize answers on localhost only, not on ${JSON.stringify(host)}`,
    );
  }
}

/** A requester's access, checked: anything but an actor and known permissions is a denial, not a guess. */
function checkedAccess(answer: unknown): ConsoleAccess | null {
  if (!answer || typeof answer !== 'object') return null;
  const { actor, permissions } = answer as { actor?: unknown; permissions?: unknown };
  if (typeof actor !== 'string' || actor.trim() === '' || !Array.isArray(permissions)) return null;
  const known = CONSOLE_PERMISSIONS.filter((permission) => (permissions as unknown[]).includes(permission));
  return known.includes('view') ? { actor, permissions: known } : null;
}

/**
 * Who may see and do what, asked of the app's `authorize` at every request, before anything of the page is made;
 * and the CSRF check of every action: a token in a cookie that only this console's pages set (SameSite=Strict,
 * HttpOnly), which the form must repeat (a cross-site page can neither read it nor set it), and a browser's own
 * word on where the request came from (`Sec-Fetch-Site`, `Origin`) where it gives one.
 */
export class ConsoleGate {
  constructor(private readonly options: ResolvedConsoleOptions) {}

  async access(request: ConsoleRequest): Promise<ConsoleAccess> {
    refuseCrossSiteReads(request);
    if (this.options.unauthenticated) refuseNonLoopback(request);
    let answer: unknown;
    try {
      answer = await this.options.authorize(request);
    } catch (error) {
      if (error instanceof HttpException) throw error;
      // An authorize that fails denies: the console never opens on an error.
      throw new UnauthorizedException('the console could not authorize this request');
    }
    const access = checkedAccess(answer);
    if (!access) throw new UnauthorizedException('not authorized for the mail console');
    return access;
  }

  /** The access of a requester who may act, in a console that allows actions. */
  async actor(request: ConsoleRequest): Promise<ConsoleAccess> {
    const access = await this.access(request);
    if (this.options.readOnly) throw new ForbiddenException('the mail console is read-only');
    if (!access.permissions.includes('act')) throw new ForbiddenException(`${access.actor} may not act on mail`);
    return access;
  }

  /** The CSRF token of this browser, set in its cookie (for the console's path, `base`) when it has none yet. */
  csrfToken(request: ConsoleRequest, response: ConsoleResponse, base: string): string {
    const existing = cookie(request, CSRF_COOKIE);
    if (existing && /^[A-Za-z0-9_-]{43}$/.test(existing)) return existing;
    const token = randomBytes(32).toString('base64url');
    const secure = request.protocol === 'https' ? '; Secure' : '';
    response.header('set-cookie', `${CSRF_COOKIE}=${token}; Path=${base || '/'}; HttpOnly; SameSite=Strict${secure}`);
    return token;
  }

  checkCsrf(request: ConsoleRequest, submitted: unknown): void {
    const site = header(request, 'sec-fetch-site');
    if (site !== undefined && site !== 'same-origin') {
      throw new ForbiddenException(`refused: an action posted from another site (Sec-Fetch-Site: ${site})`);
    }
    const origin = header(request, 'origin');
    const host = header(request, 'host');
    if (origin !== undefined && host !== undefined && hostOf(origin) !== host) {
      throw new ForbiddenException(`refused: an action posted from ${origin}`);
    }
    const expected = cookie(request, CSRF_COOKIE);
    if (!expected || typeof submitted !== 'string' || !sameText(expected, submitted)) {
      throw new ForbiddenException('refused: the form’s CSRF token is missing or does not match; reload the page');
    }
  }

  static may(access: ConsoleAccess, permission: ConsolePermission): boolean {
    return access.permissions.includes(permission);
  }
}
