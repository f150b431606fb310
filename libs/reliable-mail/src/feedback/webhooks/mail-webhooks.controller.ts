import {
  applyDecorators,
  BadRequestException,
  Controller,
  Get,
  Header,
  HttpCode,
  HttpException,
  Inject,
  InternalServerErrorException,
  Logger,
  NotFoundException,
  Param,
  Post,
  Query,
  Req,
  ServiceUnavailableException,
  type Type,
  UnauthorizedException,
  Optional,
} from '@nestjs/common';
import { FeedbackPayloadError, FeedbackSignatureError, FeedbackUnavailableError } from '../../errors.js';
import { MailUnsubscribeService } from '../../unsubscribe/mail-unsubscribe.service.js';
import { confirmationPage, UNSUBSCRIBE_PAGE_HEADERS, unsubscribedPage } from '../../unsubscribe/unsubscribe-pages.js';
import { type UnsubscribeRequest, UnsubscribeTokenError } from '../../unsubscribe/unsubscribe-token.js';
import { type FeedbackIngestResult, MailFeedbackService } from '../mail-feedback.service.js';
import { isOneClickPost } from './one-click-body.js';
import { RawBodyError, rawBodyOf, type WebhookRequest } from './raw-body.js';
import type { ResolvedWebhooksOptions } from './webhooks-options.js';

/** The headers of the unsubscribe pages, on a route's answer. */
const unsubscribePageHeaders = () =>
  applyDecorators(...Object.entries(UNSUBSCRIBE_PAGE_HEADERS).map(([name, value]) => Header(name, value)));

export const WEBHOOKS_OPTIONS = Symbol('reliable-mail:webhooks-options');

/**
 * The webhook routes at `path`: `POST <path>/<source>` for each configured source. 200 once the feedback has
 * committed (also for a repeat, and for a report with nothing to store), 401 when the signature or credentials do
 * not verify, 400 when the verified body cannot be read, 503 when it cannot be checked now (SNS retries a 5xx), 404
 * for a source not configured, 413 past the size limit.
 *
 * And the one-click unsubscribe route (RFC 8058) of the links in non-transactional mail, `<path>/unsubscribe?token=…`:
 * a POST of `List-Unsubscribe=One-Click` unsubscribes the link's recipient from its category, 200 once committed (a
 * repeat too); a GET answers a page whose button posts it, and unsubscribes nobody (link scanners fetch links). 400
 * with the reason for a token this app did not make, or a POST of another body: nothing is written, and no
 * credentials are involved, so never 401. 404 where ReliableMailModule has no `unsubscribe`.
 *
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
      @Optional() @Inject(MailUnsubscribeService) private readonly unsubscribes: MailUnsubscribeService | undefined,
    ) {
      // Without it the module's start fails before a route is served, naming the fix (WebhookSourceRegistration).
      this.feedback = feedback as MailFeedbackService;
    }

    // Before `:source`, which would take `unsubscribe` for a source's name on Express (Fastify prefers it anyway).
    @Get('unsubscribe')
    @unsubscribePageHeaders()
    confirmUnsubscribe(@Query('token') token: unknown): string {
      return confirmationPage(this.readLink(token), token as string);
    }

    @Post('unsubscribe')
    @HttpCode(200)
    @unsubscribePageHeaders()
    async unsubscribe(@Query('token') token: unknown, @Req() request: WebhookRequest): Promise<string> {
      this.readLink(token);
      let oneClick: boolean;
      try {
        oneClick = await isOneClickPost(request, this.options.maxBodyBytes);
      } catch (error) {
        throw this.answerTo('unsubscribe', error);
      }
      if (!oneClick) {
        throw new BadRequestException(
          'a one-click unsubscribe posts the form field List-Unsubscribe=One-Click (RFC 8058); nothing was changed',
        );
      }
      const done = await this.unsubscribes!.unsubscribe(token);
      // A person's browser, from the page's button, is told it is done; a mail client wants an empty 200.
      return /\btext\/html\b/.test(String(request.headers.accept ?? '')) ? unsubscribedPage(done) : '';
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

    /** What a link's token unsubscribes: 404 where unsubscribe is not configured, 400 for a token not this app's. */
    private readLink(token: unknown): UnsubscribeRequest {
      if (!this.unsubscribes?.configured) {
        throw new NotFoundException(
          "one-click unsubscribe is not configured (ReliableMailModule's unsubscribe option)",
        );
      }
      try {
        return this.unsubscribes.read(token);
      } catch (error) {
        if (!(error instanceof UnsubscribeTokenError)) throw error;
        this.logger.warn({ msg: 'unsubscribe link refused', reason: error.reason });
        throw new BadRequestException(error.message);
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
