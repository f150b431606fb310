import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService, MikroOrmHealthIndicator } from '@nestjs/terminus';
import { MailOutboxHealthIndicator } from '@reliable-mail/nestjs';

@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly database: MikroOrmHealthIndicator,
    private readonly mail: MailOutboxHealthIndicator,
  ) {}

  /** 200 while the database answers and mail flows; 503 with the failing parts otherwise. */
  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.database.pingCheck('database'), () => this.mail.isHealthy('mail')]);
  }
}
