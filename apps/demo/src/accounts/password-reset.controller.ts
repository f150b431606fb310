import { randomInt } from 'node:crypto';
import { Body, Controller, HttpCode, HttpStatus, Post } from '@nestjs/common';
import { MailOutboxService } from '@reliable-mail/nestjs';
import { emailField, objectBody } from '../common/input.js';

@Controller('password-reset')
export class PasswordResetController {
  constructor(private readonly outbox: MailOutboxService) {}

  /**
   * `{ email }` → 202 `{ mail: { id, messageId, status } }`. The code goes only into the mail; a real app would store
   * its hash with an expiry. No idempotency key: every request is a new code and a new mail.
   */
  @Post()
  @HttpCode(HttpStatus.ACCEPTED)
  async request(@Body() input: unknown): Promise<{ mail: { id: string; messageId: string; status: string } }> {
    const email = emailField(objectBody(input));
    const code = randomInt(0, 1_000_000).toString().padStart(6, '0');
    const mail = await this.outbox.enqueue(
      {
        to: email,
        subject: 'Your password reset code',
        text: `Your password reset code is ${code}.\n\nIt is valid for 15 minutes. If you did not ask for it, ignore this mail.`,
        html: `<p>Your password reset code is <strong>${code}</strong>.</p><p>It is valid for 15 minutes. If you did not ask for it, ignore this mail.</p>`,
      },
      // The critical lane keeps it ahead of any bulk backlog; past its validity it ends as expired instead of late.
      { metadata: { source: 'password-reset' }, lane: 'critical', ttlMs: 15 * 60_000 },
    );
    return { mail: { id: mail.id, messageId: mail.messageId, status: mail.status } };
  }
}
