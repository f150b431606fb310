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
 * One transport per lane, with connections of its own as many as its concurrency: a bulk lane's backlog never
 * waits in front of a login code for a connection.
 */
export const transportsProvider: Provider = {
  provide: MAIL_TRANSPORTS,
  inject: [RELIABLE_MAIL_OPTIONS],
  useFactory: (options: ResolvedReliableMailOptions): Map<string, MailTransport> => {
    const defaultSender = normalizeAddress('from', options.from);
    return new Map(
      options.lanes.map((lane) => [lane.name, new SmtpMailTransport(lane.transport, lane.concurrency, defaultSender)]),
    );
  },
};

/** The templates of the options; providers of the app add more through `register`. */
export const templateRegistryProvider: Provider = {
  provide: MailTemplateRegistry,
  inject: [RELIABLE_MAIL_OPTIONS],
  useFactory: (options: ResolvedReliableMailOptions) => MailTemplateRegistry.of(options.templates),
};
