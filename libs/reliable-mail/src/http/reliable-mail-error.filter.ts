import { type ArgumentsHost, Catch, type ExceptionFilter, HttpStatus, Injectable, Logger } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { type Observable, throwError } from 'rxjs';
import {
  IdempotencyConflictError,
  MailValidationError,
  OutboxRowNotCancellableError,
  OutboxRowNotFoundError,
  ReliableMailError,
} from '../errors.js';

/**
 * The HTTP status a reliable-mail error stands for when a request caused it: the caller's mail or filter (400), an
 * idempotency key reused with other content or a row no longer cancellable (409), an unknown row (404). Anything
 * else is the server's own fault (500).
 */
export function httpStatusOf(error: ReliableMailError): HttpStatus {
  if (error instanceof MailValidationError) return HttpStatus.BAD_REQUEST;
  if (error instanceof IdempotencyConflictError || error instanceof OutboxRowNotCancellableError)
    return HttpStatus.CONFLICT;
  if (error instanceof OutboxRowNotFoundError) return HttpStatus.NOT_FOUND;
  return HttpStatus.INTERNAL_SERVER_ERROR;
}

/**
 * Answers an HTTP request that failed with a reliable-mail error with the status its kind calls for and the
 * library's reason, in Nest's error shape (`statusCode`, `error`, `message`; `field` for a validation error), on
 * Express and Fastify alike. A 500 keeps its message out of the answer, as Nest does, and logs it. Other contexts
 * get the error back as their own filters expect it: an RPC handler as an erroring Observable, a GraphQL resolver
 * as the error itself.
 *
 * ```ts
 * providers: [{ provide: APP_FILTER, useClass: ReliableMailErrorFilter }]
 * ```
 */
@Catch(ReliableMailError)
@Injectable()
export class ReliableMailErrorFilter implements ExceptionFilter<ReliableMailError> {
  private readonly logger = new Logger('ReliableMailErrorFilter');

  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(error: ReliableMailError, host: ArgumentsHost): Observable<never> | ReliableMailError | void {
    if (host.getType() === 'rpc') return throwError(() => error);
    if (host.getType() !== 'http') return error;
    const status = httpStatusOf(error);
    const body: Record<string, unknown> = { statusCode: status, error: error.name, message: error.message };
    if (status === HttpStatus.INTERNAL_SERVER_ERROR) {
      this.logger.error(error.message, error.stack);
      body.error = 'Internal Server Error';
      body.message = 'Internal server error';
    }
    if (error instanceof MailValidationError) body.field = error.field;
    if (error instanceof IdempotencyConflictError) body.existingId = error.existingId;
    this.adapterHost.httpAdapter.reply(host.switchToHttp().getResponse(), body, status);
  }
}
