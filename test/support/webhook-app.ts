import type { AddressInfo } from 'node:net';
import {
  MailOutboxAdmin,
  MailOutboxService,
  type ReliableMailOptions,
  ReliableMailWebhooksModule,
  type WebhookSourcesOptions,
} from '@reliable-mail/nestjs';
import type { SmtpScript } from './smtp-test-server.js';
import { type TestAppOptions, testMailOptions, waitFor } from './test-app.js';
import type { TestBed } from './test-bed.js';

/**
 * An app with `ReliableMailWebhooksModule` listening on a port of its own, sending to the test bed's SMTP server:
 * webhooks are real HTTP requests into it.
 */
export async function startWebhookApp(
  bed: TestBed,
  sources: WebhookSourcesOptions,
  {
    script = {},
    overrides = {},
    maxBodyBytes,
    http,
  }: {
    script?: SmtpScript;
    overrides?: Partial<ReliableMailOptions>;
    maxBodyBytes?: number;
    http?: TestAppOptions['http'];
  } = {},
) {
  const server = await bed.startSmtp(script);
  const app = await bed.startApp(testMailOptions(server.url, overrides), [], {
    imports: [ReliableMailWebhooksModule.forRoot({ path: 'webhooks/mail', sources, maxBodyBytes })],
    http,
  });
  await app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}/webhooks/mail`;
  const outbox = app.get(MailOutboxService);
  return {
    app,
    outbox,
    admin: app.get(MailOutboxAdmin),
    post: (source: string, body: string, headers: Record<string, string>) =>
      fetch(`${base}/${source}`, { method: 'POST', headers, body }),
    /** Sends one mail and waits until it is sent; the row and the message as the SMTP server got it. */
    async sendMail(to: string | string[]) {
      const sent = app.events.sent.length;
      const mail = await outbox.enqueue({ to, subject: 'Your order', text: 'Thanks' });
      await waitFor('sent', () => app.events.sent.length > sent);
      return { ...mail, received: server.received.find((message) => message.messageId === mail.messageId)! };
    },
  };
}

/** The feedback table, in the order it was written. */
export function feedbackRows(bed: TestBed): Promise<Array<Record<string, any>>> {
  return bed.execute(`select * from mail_outbox_feedback order by id`) as Promise<Array<Record<string, any>>>;
}
