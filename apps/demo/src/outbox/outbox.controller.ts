import { Controller, Get, Param, Query } from '@nestjs/common';
import {
  MailOutboxAdmin,
  MailOutboxService,
  type OutboxRowWithAttempts,
  type OutboxStats,
  type OutboxStatus,
} from '@reliable-mail/nestjs';

@Controller('outbox')
export class OutboxController {
  constructor(
    private readonly outbox: MailOutboxService,
    private readonly admin: MailOutboxAdmin,
  ) {}

  /** The outbox's figures and its 20 most recent rows (`?status=dead` to narrow them). */
  @Get()
  async overview(
    @Query('status') status?: OutboxStatus,
  ): Promise<{ stats: OutboxStats; recent: OutboxRowWithAttempts[] }> {
    const [stats, recent] = await Promise.all([
      this.admin.stats(),
      this.admin.list(status ? { status } : {}, { limit: 20 }),
    ]);
    return { stats, recent };
  }

  /** The outbox row and its attempts; 404 (OutboxRowNotFoundError) for an unknown id. */
  @Get(':id')
  get(@Param('id') id: string): Promise<OutboxRowWithAttempts> {
    return this.outbox.get(id);
  }
}
