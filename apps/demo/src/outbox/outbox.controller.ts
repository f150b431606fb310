import { Controller, Get, Param } from '@nestjs/common';
import { MailOutboxService, type OutboxRowWithAttempts } from '@reliable-mail/nestjs';

@Controller('outbox')
export class OutboxController {
  constructor(private readonly outbox: MailOutboxService) {}

  /** The outbox row and its attempts; 404 (OutboxRowNotFoundError) for an unknown id. */
  @Get(':id')
  get(@Param('id') id: string): Promise<OutboxRowWithAttempts> {
    return this.outbox.get(id);
  }
}
