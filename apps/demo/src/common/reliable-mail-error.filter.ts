import { type ArgumentsHost, Catch, type ExceptionFilter, HttpStatus, Logger } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import {
  IdempotencyConflictError,
  MailValidationError,
  OutboxRowNotFoundError,
  ReliableMailError,
} from '@reliable-mail/nestjs';

function statusOf(error: ReliableMailError): number {
  if (error instanceof MailValidationError) return HttpStatus.BAD_REQUEST;
  if (error instanceof IdempotencyConflictError) return HttpStatus.CONFLICT;
  if (error instanceof OutboxRowNotFoundError) return HttpStatus.NOT_FOUND;
  return HttpStatus.INTERNAL_SERVER_ERROR;
}

/** Turns reliable-mail's errors into HTTP answers: the library's message, with the status its kind calls for. */
@Catch(ReliableMailError)
export class ReliableMailErrorFilter implements ExceptionFilter<ReliableMailError> {
  private readonly logger = new Logger('ReliableMailErrorFilter');

  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(error: ReliableMailError, host: ArgumentsHost): void {
    const status = statusOf(error);
    if (status >= 500) this.logger.error(error.message, error.stack);
    const body: Record<string, unknown> = { statusCode: status, error: error.name, message: error.message };
    if (error instanceof MailValidationError) body.field = error.field;
    const { httpAdapter } = this.adapterHost;
    httpAdapter.reply(host.switchToHttp().getResponse(), body, status);
  }
}
