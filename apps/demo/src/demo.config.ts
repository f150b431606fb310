import type {
  ReliableMailConsoleOptions,
  ReliableMailOptions,
  TransportOption,
  WebhookSourcesOptions,
} from '@reliable-mail/nestjs';
import { orderConfirmationTemplate } from './orders/order-confirmation.template.js';

/** Everything the demo app needs from outside; `createDemoApp` takes it. */
export interface DemoAppOptions {
  /** PostgreSQL URL of the shop's database (`postgres://user:pass@host:port/db`). */
  databaseUrl: string;
  /** SMTP URL mail is sent through (`smtp://host:port`, `smtps://user:pass@host`), unless `transport` is given. */
  smtpUrl?: string;
  /** A provider transport to send through instead of SMTP (see mail-transport.env.ts). */
  transport?: TransportOption;
  /** The shop's sender; a provider sends only from a domain or address verified with it. */
  from?: string;
  /** The port the app will listen on; used for the links in mails. Default 3000. */
  port?: number;
  /** Overrides of the reliable-mail options the demo uses (tests: short polls and retries). */
  mail?: Partial<ReliableMailOptions>;
  /**
   * The mail console at `/mail`. Default: open to anyone who reaches the demo (`allowUnauthenticated`), which the
   * console refuses when NODE_ENV is production: give `authorize` there.
   */
  console?: ReliableMailConsoleOptions;
  /** Providers' delivery feedback webhooks at `/webhooks/mail/<source>`; none by default. */
  webhooks?: WebhookSourcesOptions;
  /** The HTTP platform; the console and the webhooks are served on both. Default express. */
  platform?: 'express' | 'fastify';
}

export interface DemoConfig {
  databaseUrl: string;
  port: number;
  /** Where the shop is reached, for links in mails. */
  baseUrl: string;
  mail: ReliableMailOptions;
  console: ReliableMailConsoleOptions;
  webhooks?: WebhookSourcesOptions;
}

export const DEMO_CONFIG = Symbol('DEMO_CONFIG');

export const DEFAULT_PORT = 3000;

export function resolveDemoConfig(options: DemoAppOptions): DemoConfig {
  const port = options.port ?? DEFAULT_PORT;
  const transport = options.transport ?? options.smtpUrl;
  if (transport === undefined) throw new Error('the demo needs an smtpUrl or a transport');
  return {
    databaseUrl: options.databaseUrl,
    port,
    baseUrl: `http://localhost:${port}`,
    console: options.console ?? { allowUnauthenticated: true },
    webhooks: options.webhooks,
    mail: {
      transport,
      from: options.from ?? 'Demo Shop <shop@example.com>',
      messageIdDomain: 'shop.example.com',
      templates: [orderConfirmationTemplate],
      ...options.mail,
    },
  };
}
