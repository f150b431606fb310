import { hostname } from 'node:os';
import type { TestingModuleBuilder } from '@nestjs/testing';
import type { ReliableMailOptions } from '../options/reliable-mail-options.interface.js';
import { resolveOptions, type ResolvedReliableMailOptions } from '../options/resolve-options.js';
import { RELIABLE_MAIL_OPTIONS } from '../reliable-mail.constants.js';
import { MODULE_OPTIONS } from '../reliable-mail.module-definition.js';
import { CapturingTransport } from './capturing.transport.js';

/**
 * The app's own reliable-mail options, checked as at any start, with every lane sending to one capturing transport
 * and nothing running by itself: no dispatcher loop, no retention, no timer and no connection to a mail server.
 * Mail goes out when the test says so (`MailTester.drain`).
 */
function capturing(options: ReliableMailOptions, transport: CapturingTransport): ResolvedReliableMailOptions {
  const resolved = resolveOptions(options, hostname(), process.pid);
  return {
    ...resolved,
    dispatcher: { ...resolved.dispatcher, enabled: false },
    retention: { ...resolved.retention, enabled: false },
    lanes: resolved.lanes.map((lane) => ({ ...lane, transport: { kind: 'object', transport } })),
  };
}

/**
 * Makes a testing module's reliable-mail capture its mail instead of sending it, whatever transport the app
 * configured (`forRoot` or `forRootAsync`): the outbox, the database and the events stay the app's own.
 *
 * ```ts
 * const moduleRef = await withMailCapture(Test.createTestingModule({ imports: [AppModule] })).compile();
 * const app = await moduleRef.createNestApplication().init();
 * const mail = MailTester.of(app);
 * ```
 */
export function withMailCapture(
  builder: TestingModuleBuilder,
  transport: CapturingTransport = new CapturingTransport(),
): TestingModuleBuilder {
  return builder.overrideProvider(RELIABLE_MAIL_OPTIONS).useFactory({
    inject: [MODULE_OPTIONS],
    factory: (options: ReliableMailOptions) => capturing(options, transport),
  });
}
