import { hostname } from 'node:os';
import type { Provider } from '@nestjs/common';
import { resolveOptions, type ResolvedReliableMailOptions } from './options/resolve-options.js';
import type { ReliableMailOptions } from './options/reliable-mail-options.interface.js';
import { MAIL_TRANSPORTS, RELIABLE_MAIL_OPTIONS } from './reliable-mail.constants.js';
import { MODULE_OPTIONS } from './reliable-mail.module-definition.js';
import { MailTemplateRegistry } from './templates/mail-template.registry.js';
import type { MailTransport } from './transport/mail-transport.interface.js';
import { normalizeAddress } from './outbox/validation/addresses.js';
import { SmtpMailTransport } from './transport/smtp/smtp-mail.transport.js';

/** The options, resolved once: defaults applied and every value checked (an `InvalidOptionsError` stops start-up). */
export const optionsProvider: Provider = {
  provide: RELIABLE_MAIL_OPTIONS,
  inject: [MODULE_OPTIONS],
  useFactory: (options: ReliableMailOptions) => resolveOptions(options, hostname(), process.pid),
};

/**
 * Each lane's transport. An SMTP lane gets one of its own, with connections as many as its concurrency: a bulk
 * lane's backlog never waits in front of a login code for a connection. A transport object serves every lane it
 * is given to, and is opened once (a provider loads its SDK then: a missing one stops the start).
 */
export const transportsProvider: Provider = {
  provide: MAIL_TRANSPORTS,
  inject: [RELIABLE_MAIL_OPTIONS],
  useFactory: async (options: ResolvedReliableMailOptions): Promise<Map<string, MailTransport>> => {
    const defaultSender = normalizeAddress('from', options.from);
    const transports = new Map<string, MailTransport>(
      options.lanes.map(({ name, transport, concurrency }) => [
        name,
        transport.kind === 'smtp'
          ? new SmtpMailTransport(transport.options, concurrency, defaultSender)
          : transport.transport,
      ]),
    );
    await Promise.all(
      [...new Set(transports.values())].map(async (transport) => {
        await transport.open?.({ defaultSender });
      }),
    );
    return transports;
  },
};

/**
 * The templates of the options, each folder of files read (a folder missing or broken stops the start); providers of
 * the app add more through `register`.
 */
export const templateRegistryProvider: Provider = {
  provide: MailTemplateRegistry,
  inject: [RELIABLE_MAIL_OPTIONS],
  useFactory: (options: ResolvedReliableMailOptions) => MailTemplateRegistry.load(options.templates),
};
