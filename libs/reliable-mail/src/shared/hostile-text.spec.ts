import { describe, expect, it } from '@jest/globals';
import type { PageContext } from '../console/views/layout.js';
import { redacted } from '../console/views/layout.js';
import { loggedReply } from './logged-reply.js';
import { MailRenderer } from '../dispatch/mail-renderer.js';
import { addressIn } from '../feedback/feedback-report.js';
import { dsnFeedbackOf, parseDeliveryStatus } from '../feedback/sources/delivery-status.js';
import { handlebarsTemplate } from '../templates/handlebars-template.js';
import { htmlToText } from '../templates/html-to-text.js';
import { MailTemplateRegistry } from '../templates/mail-template.registry.js';
import { classifySesError } from '../transport/ses/ses-classification.js';
import { providerMessageIdOf } from '../transport/smtp/smtp-reply.js';

// Text from outside (a bounce anyone can mail, a server's reply, a provider's error, a parameter an app passes
// through), a million characters shaped so that a pattern tried from each of them backtracks over the rest: each
// reader answers as it does for short text. Before the patterns were anchored or bounded, each of these took
// quadratic time (256,000 characters: 22-96 s) and held the event loop; a synchronous loop cannot be timed out, so
// each test here hung on that code.
const MILLION = 1_000_000;

describe('text a million characters long, shaped to make a pattern backtrack', () => {
  it('a DSN date field: not read as a date, the report still is', () => {
    const status = parseDeliveryStatus(
      [
        'Reporting-MTA: dns; mx.example.org',
        'Arrival-Date: Thu, 3 Dec 2026 10:00:00 +0000',
        '',
        'Final-Recipient: rfc822; a@example.org',
        'Action: failed',
        'Status: 5.1.1',
        `Last-Attempt-Date: ${'('.repeat(MILLION)}`,
      ].join('\r\n'),
    );
    const [item] = dsnFeedbackOf(status, {
      rowId: null,
      messageId: null,
      providerEventId: '<dsn@mx.example.org>',
      payload: {},
      date: null,
      authenticates: () => false,
    });
    expect(item.reportedAt).toEqual(new Date('2026-12-03T10:00:00Z'));
  });

  it("a report's recipient field of `<` and @s with no `>`", () => {
    expect(addressIn(`<${'@'.repeat(MILLION)}`)).toBeNull();
  });

  it('a reply or reason shown in the console to who may not read content', () => {
    const page = {
      base: '/mail',
      access: { permissions: [] },
      readOnly: true,
      csrfToken: '',
    } as unknown as PageContext;
    const text = `550 ${'a'.repeat(MILLION)} <ann@example.com>`;
    expect(redacted(page, text)).toBe(`550 ${'a'.repeat(MILLION)} <(address hidden)>`);
  });

  it("a server's reply in the log", () => {
    const reply = `550 ${'a'.repeat(MILLION / 2)}@${'.'.repeat(MILLION / 2)}`;
    expect(loggedReply({ replyCode: 550, enhancedStatus: null, reply }).reply).toBe(reply);
  });

  it("SES's refusal naming identities", () => {
    const message = `Email address is not verified. The following identities failed the check: ${'a'.repeat(MILLION)}`;
    const context = { recipients: ['ann@example.com'], sender: 'shop@example.com', fromDefaultSender: true };
    expect(
      classifySesError({ name: 'MessageRejected', message, $metadata: { httpStatusCode: 400 } }, context),
    ).toMatchObject({ status: 'refused', refusedRecipients: [] });
  });

  it("a server's 250 reply with no queue id", () => {
    expect(providerMessageIdOf(`250 2.0.0${' '.repeat(MILLION)}!`)).toBeNull();
  });

  // Raw html reaches the text part through a triple-stash parameter or an app's own html: a run of start tags with
  // no end, or one end far after them, took super-linear time (64,000 characters: 0.1-1.8 s; three million `<a>`).
  it.each([
    ['`<` with no `>`', '<'.repeat(MILLION), '<'.repeat(MILLION)],
    ['style start tags never ended', '<style x'.repeat(MILLION / 8), '<style x'.repeat(MILLION / 8)],
    ['style start tags ended by one `>` far after them', `${'<style x'.repeat(MILLION / 8)}>`, ''],
    ['link start tags ended by one `</a>` far after them', `${'<a '.repeat(MILLION / 3)}</a>`, ''],
    ['links with no `</a>` after them', `</a>${'<a>'.repeat(MILLION)}x`, 'x'],
    ['comments never closed', `-->${'<!--'.repeat(MILLION / 4)}x`, `-->${'<!--'.repeat(MILLION / 4)}x`],
    ['paragraph tags never closed', `${'<p '.repeat(MILLION / 3)}x`, `${'<p '.repeat(MILLION / 3)}x`],
  ])('html: %s', (_shape, html, text) => {
    expect(htmlToText(html)).toBe(text);
  });

  it('a subject parameter of spaces before a line break or a NUL', async () => {
    const template = handlebarsTemplate({ name: 'note', version: 1, subject: '{{s}}', html: '<p>x</p>' });
    const signal = new AbortController().signal;
    const folded = await template.render({ s: `${' '.repeat(MILLION)}x\n` }, { messageId: '<m@x>', signal });
    expect(folded.subject).toBe('x');
    const registry = new MailTemplateRegistry();
    registry.register(template);
    const mail = await new MailRenderer(registry, { attachmentResolver: null }, null).render(
      '<m@x>',
      {
        v: 2,
        from: { address: 'shop@example.com' },
        to: [{ address: 'ann@example.com' }],
        cc: [],
        bcc: [],
        replyTo: [],
        headers: {},
        template: { name: 'note', version: 1, params: { s: `a${' '.repeat(MILLION)}x\0b` } },
      },
      signal,
    );
    expect(mail.subject).toBe(`a${' '.repeat(MILLION)}x b`);
  });
});
