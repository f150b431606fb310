import { Controller, Get } from '@nestjs/common';
import { type AuditEntry, AuditService } from './audit.service.js';

@Controller('events')
export class AuditController {
  constructor(private readonly audit: AuditService) {}

  /** The last 100 EmailSentEvent / EmailFailedEvent received, oldest first. */
  @Get()
  list(): AuditEntry[] {
    return this.audit.list();
  }
}
