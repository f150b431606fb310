import type { ReliableMailOptions } from '@reliable-mail/nestjs';
import { orderConfirmationTemplate } from './orders/order-confirmation.template.js';

/** Everything the demo app needs from outside; `createDemoApp` takes it. */
export interface DemoAppOptions {
  /** PostgreSQL URL of the shop's database (`postgres://user:pass@host:port/db`). */
  databaseUrl: string;
  /** SMTP URL mail is sent through (`smtp://host:port`, `smtps://user:pass@host`). */
  smtpUrl: string;
  /** The port the app will listen on; used for the links in mails. Default 3000. */
  port?: number;
  /** Overrides of the reliable-mail options the demo uses (tests: short polls and retries). */
  mail?: Partial<ReliableMailOptions>;
}

export interface DemoConfig {
  databaseUrl: string;
  smtpUrl: string;
  port: number;
  /** Where the shop is reached, for links in mails. */
  baseUrl: string;
  mail: ReliableMailOptions;
}

export const DEMO_CONFIG = Symbol('DEMO_CONFIG');

export const DEFAULT_PORT = 3000;

export function resolveDemoConfig(options: DemoAppOptions): DemoConfig {
  const port = options.port ?? DEFAULT_PORT;
  return {
    databaseUrl: options.databaseUrl,
    smtpUrl: options.smtpUrl,
    port,
    baseUrl: `http://localhost:${port}`,
    mail: {
      transport: options.smtpUrl,
      from: 'Demo Shop <shop@example.com>',
      messageIdDomain: 'shop.example.com',
      templates: [orderConfirmationTemplate],
      ...options.mail,
    },
  };
}
