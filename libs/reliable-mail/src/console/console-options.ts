import { ReliableMailSetupError } from '../errors.js';

/** What a requester may do in the console: look, act on mail, and read mail's content and recipients' addresses. */
export type ConsolePermission = 'view' | 'act' | 'content';

export const CONSOLE_PERMISSIONS: readonly ConsolePermission[] = ['view', 'act', 'content'];

/** The requester as the app's `authorize` answers: who (the audit's actor) and what they may do. */
export interface ConsoleAccess {
  actor: string;
  permissions: readonly ConsolePermission[];
}

/**
 * Answers for each request, from whatever the app authenticates with (a session, a header set by its proxy, basic
 * auth): the access, or null to deny it (401). It may also throw an HttpException of its own, which the console
 * passes on (a 401 with `WWW-Authenticate`, say). `request` is the platform's: Express's or Fastify's.
 */
export type ConsoleAuthorize = (
  request: unknown,
) => ConsoleAccess | null | undefined | false | Promise<ConsoleAccess | null | undefined | false>;

export interface ReliableMailConsoleOptions {
  /** Required, unless `allowUnauthenticated` is set. */
  authorize?: ConsoleAuthorize;
  /**
   * Serves the console with every permission to anyone who reaches it on localhost (any other Host header is
   * refused): for a demo or a laptop. Refused when `NODE_ENV` is `production`.
   */
  allowUnauthenticated?: boolean;
  /** Refuses every action with 403, whatever `authorize` answers. Default false. */
  readOnly?: boolean;
  /** How often an open overview refreshes its figures. Default 5,000 ms. */
  refreshIntervalMs?: number;
  /**
   * How many hours the overview's charts cover, from 1 to 24. Default 6: with a million rows its figures take 31 ms
   * (p95); 24 hours take 177 ms (`npm run bench:console`).
   */
  chartHours?: number;
  /**
   * The page at the console's root: the overview, or the preview of the newest mails (what
   * `ReliableMailPreviewModule` mounts in development). Default `'overview'`.
   */
  home?: 'overview' | 'preview';
}

export interface ResolvedConsoleOptions {
  path: string;
  authorize: ConsoleAuthorize;
  /** `allowUnauthenticated` without `authorize`: answered on a loopback host only. */
  unauthenticated: boolean;
  readOnly: boolean;
  refreshIntervalMs: number;
  chartHours: number;
  home: 'overview' | 'preview';
}

const EVERYTHING: ConsoleAccess = { actor: 'anonymous', permissions: CONSOLE_PERMISSIONS };

function wholeNumber(name: string, value: unknown, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new ReliableMailSetupError(`console option ${name} must be a whole number from ${min} to ${max}`);
  }
  return value;
}

function homeOf(home: unknown): 'overview' | 'preview' {
  if (home === undefined || home === 'overview' || home === 'preview') return home ?? 'overview';
  throw new ReliableMailSetupError(`console option home must be 'overview' or 'preview', got ${JSON.stringify(home)}`);
}

/** The console's options, checked before a route is mounted: a console nobody guards is refused at start. */
export function resolveConsoleOptions(
  path: string,
  options: ReliableMailConsoleOptions,
  environment: string | undefined = process.env.NODE_ENV,
): ResolvedConsoleOptions {
  const { authorize, allowUnauthenticated = false } = options ?? {};
  if (authorize !== undefined && typeof authorize !== 'function') {
    throw new ReliableMailSetupError('console option authorize must be a function (request) => ConsoleAccess | null');
  }
  if (allowUnauthenticated && environment === 'production') {
    throw new ReliableMailSetupError(
      'ReliableMailConsoleModule: allowUnauthenticated is refused when NODE_ENV is production: give authorize',
    );
  }
  if (!authorize && !allowUnauthenticated) {
    throw new ReliableMailSetupError(
      'ReliableMailConsoleModule needs authorize(request) => { actor, permissions } | null, which decides who sees ' +
        'the console and what they may do; or allowUnauthenticated: true, outside production only',
    );
  }
  if (typeof path !== 'string' || !/^[A-Za-z0-9/_-]*$/.test(path)) {
    throw new ReliableMailSetupError(`console path must be letters, digits, /, _ and -, got ${JSON.stringify(path)}`);
  }
  return {
    path: path.replace(/^\/+|\/+$/g, ''),
    authorize: authorize ?? (() => EVERYTHING),
    unauthenticated: !authorize,
    readOnly: options.readOnly === true,
    refreshIntervalMs: wholeNumber('refreshIntervalMs', options.refreshIntervalMs, 5_000, 1_000, 3_600_000),
    chartHours: wholeNumber('chartHours', options.chartHours, 6, 1, 24),
    home: homeOf(options.home),
  };
}
