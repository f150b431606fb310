import {
  BadRequestException,
  Controller,
  HttpCode,
  HttpException,
  Inject,
  InternalServerErrorException,
  Logger,
  NotFoundException,
  Param,
  Post,
  Req,
  ServiceUnavailableException,
  type Type,
  UnauthorizedException,
  Optional,
} from '@nestjs/common';
import { FeedbackPayloadError, FeedbackSignatureError, FeedbackUnavailableError } from '../../errors.js';
import { type FeedbackIngestResult, MailFeedbackService } from '../mail-feedback.service.js';
import { RawBodyError, rawBodyOf, type WebhookRequest } from './raw-body.js';
import type { ResolvedWebhooksOptions } from './webhooks-options.js';

export const WEBHOOKS_OPTIONS = Symbol('reliable-mail:webhooks-options');

/**
 * The webhook routes at `path`: `POST <path>/<source>` for each configured source. 200 once the feedback has
 * committed (also for a repeat, and for a report with nothing to store), 401 when the signature or credentials do
 * not verify, 400 when the verified body cannot be read, 503 when it cannot be checked now (SNS retries a 5xx), 404
 * for a source not configured, 413 past the size limit.
 * A controller made per module, since Nest reads a controller's path from its decorator.
 */
export function mailWebhooksControllerAt(path: string): Type {
  @Controller(path)
  class MailWebhooksController {
    private readonly logger = new Logger('ReliableMail');
    private readonly feedback: MailFeedbackService;

    constructor(
      @Inject(WEBHOOKS_OPTIONS) private readonly options: ResolvedWebhooksOptions,
      @Optional() @Inject(MailFeedbackService) feedback: MailFeedbackService | undefined,
    ) {
      // Without it the module's start fails before a route is served, naming the fix (WebhookSourceRegistration).
      this.feedback = feedback as MailFeedbackService;
    }

    @Post(':source')
    @HttpCode(200)
    async receive(@Param('source') source: string, @Req() request: WebhookRequest): Promise<FeedbackIngestResult> {
      if (!Object.hasOwn(this.options.sources, source)) {
        throw new NotFoundException(`no feedback source "${source}" is configured`);
      }
      try {
        const body = await rawBodyOf(request, this.options.maxBodyBytes);
        return await this.feedback.ingest(source, body, request.headers);
      } catch (error) {
        throw this.answerTo(source, error);
      }
    }

    private answerTo(source: string, error: unknown): unknown {
      if (error instanceof FeedbackSignatureError) {
        this.logger.warn({ msg: 'webhook refused', source, reason: error.reason });
        return new UnauthorizedException(error.message);
      }
      if (error instanceof FeedbackPayloadError) {
        this.logger.warn({ msg: 'malformed webhook', source, reason: error.reason });
        return new BadRequestException(error.message);
      }
      if (error instanceof FeedbackUnavailableError) {
        this.logger.warn({ msg: 'webhook not checked now', source, reason: error.reason });
        return new ServiceUnavailableException(error.message);
      }
      if (error instanceof RawBodyError) {
        if (error.status === 413) return new HttpException(error.message, 413);
        this.logger.error({ msg: 'webhook body unavailable', source, reason: error.message });
        return new InternalServerErrorException(error.message);
      }
      return error;
    }
  }
  return MailWebhooksController;
}
