import {
  BadRequestException,
  ForbiddenException,
  Body,
  Controller,
  Get,
  Inject,
  NotFoundException,
  Param,
  Post,
  Query,
  Redirect,
  UnprocessableEntityException,
  Req,
  Res,
  StreamableFile,
  type Type,
} from '@nestjs/common';
import { ApplicationConfig } from '@nestjs/core';
import { MailRenderer } from '../dispatch/mail-renderer.js';
import { composeMime, releaseAttachmentStreams } from '../transport/outbound-content.js';
import { MailValidationError, OutboxFilterError } from '../errors.js';
import { isUuid } from '../shared/uuid.js';
import { ConsoleActions, type MailAction, unsubscribeOf } from './console-actions.js';
import { ConsoleGate, type ConsoleRequest, type ConsoleResponse } from './console-gate.js';
import type { ConsoleAccess, ResolvedConsoleOptions } from './console-options.js';
import { filterOf, mailsQueryOf } from './console-query.js';
import { ConsoleReader } from './console-reader.js';
import {
  auditPage,
  confirmPage,
  resubscribeConfirmPage,
  suppressionConfirmPage,
  suppressionsPage,
  unsubscribesPage,
} from './views/actions.view.js';
import { CONSOLE_CSS, CONSOLE_JS } from './views/assets.js';
import { escapeHtml, type Markup } from './views/html.js';
import { filterQuery, mailsPage } from './views/mails.view.js';
import { overviewFigures, overviewPage } from './views/overview.view.js';
import { timelinePage } from './views/timeline.view.js';
import { previewPage } from './views/preview.view.js';
import { canReadContent, type PageContext } from './views/layout.js';
import type { OutboxRowWithAttempts } from '../outbox/mail.types.js';
import type { RenderedContent } from '../templates/mail-template.js';

export const CONSOLE_OPTIONS = Symbol('reliable-mail:console-options');

const PAGE_SIZE = 50;
const AUDIT_PAGE = 100;
const PREVIEW_LIST_SIZE = 30;
/** How long the preview waits for a template: a hung one must not hold an operator's request. */
const PREVIEW_TIMEOUT_MS = 5_000;

// Pages may load only the console's own stylesheet and script, frame only its own preview, and post only to
// itself; no page of it may be framed elsewhere.
const PAGE_POLICY =
  "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "frame-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/** What an action's redirect says on the page it lands on: built here, never text from the URL. */
const NOTICES: Record<string, (count: number) => string> = {
  requeue: (n) => `Requeued ${n} mail${n === 1 ? '' : 's'}.`,
  cancel: (n) => `Cancelled ${n} mail${n === 1 ? '' : 's'} (a mail being sent is cancelled by its settle).`,
  suppress: () => 'Added to the suppression list.',
  unsuppress: (n) => (n === 1 ? 'Removed from the suppression list.' : 'The address was not on the list.'),
  resubscribe: (n) =>
    n === 1
      ? 'Unsubscribe taken back: mail of its category goes to the address again.'
      : 'The address was not unsubscribed from that category.',
};

function noticeOf(query: Record<string, unknown>): string | undefined {
  const { done } = query;
  if (typeof done !== 'string' || !Object.hasOwn(NOTICES, done)) return undefined;
  return NOTICES[done](Number(query.n) || 0);
}

const VERBS: Record<MailAction, string> = { requeue: 'Requeue', cancel: 'Cancel' };

function headersFor(response: ConsoleResponse, policy: string): void {
  response.header('content-security-policy', policy);
  response.header('x-content-type-options', 'nosniff');
  // Not no-referrer: a browser then sends `Origin: null` with a form post, which checkCsrf refuses.
  response.header('referrer-policy', 'same-origin');
  response.header('cache-control', 'no-store');
}

/** A list's search from an address and its cursor, as the URL gives them to who may read addresses. */
interface AddressSearch {
  content: boolean;
  /** The address the search starts from; '' for none. */
  from: string;
  /** The URL's query, where the list's cursor is; empty without content. */
  cursor: Record<string, unknown>;
}

function addressSearchOf(access: ConsoleAccess, query: Record<string, unknown>): AddressSearch {
  // Without content a list is not searched nor paged by address: a search would tell which addresses are on it, and
  // a cursor is an address in the URL.
  const content = ConsoleGate.may(access, 'content');
  return {
    content,
    from: content && typeof query.from === 'string' ? query.from.trim() : '',
    cursor: content ? query : {},
  };
}

/** A filter or value the operator gave that cannot be used: 400 with the reason, nothing changed. */
function asBadRequest(error: unknown): unknown {
  if (error instanceof OutboxFilterError || error instanceof MailValidationError) {
    return new BadRequestException(error.message);
  }
  return error;
}

async function badRequestOnInput<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw asBadRequest(error);
  }
}

/**
 * The console's routes at `path`: pages by GET; an action's page (GET) counts what it would change and asks for a
 * reason; its form (POST, with the CSRF token) does it and redirects. Every route asks `authorize` first, so a
 * denied request gets nothing of the console, its assets included. A controller made per module, since Nest reads
 * a controller's path from its decorator.
 */
export function consoleControllerAt(path: string): Type {
  @Controller(path)
  class ReliableMailConsoleController {
    private readonly gate: ConsoleGate;

    constructor(
      @Inject(CONSOLE_OPTIONS) private readonly options: ResolvedConsoleOptions,
      private readonly reader: ConsoleReader,
      private readonly actions: ConsoleActions,
      private readonly renderer: MailRenderer,
      private readonly application: ApplicationConfig,
    ) {
      this.gate = new ConsoleGate(options);
    }

    /**
     * Where the console is reached, `/<global prefix>/<path>`: read at each request, since an app sets its global
     * prefix after the module is built.
     */
    private get base(): string {
      const parts = [this.application.getGlobalPrefix(), this.options.path].map((part) =>
        part.replace(/^\/+|\/+$/g, ''),
      );
      const path = parts.filter((part) => part !== '').join('/');
      return path === '' ? '' : `/${path}`;
    }

    private page(
      access: ConsoleAccess,
      request: ConsoleRequest,
      response: ConsoleResponse,
      query: Record<string, unknown> = {},
    ): PageContext {
      const base = this.base;
      return {
        base,
        access,
        readOnly: this.options.readOnly,
        csrfToken: this.gate.csrfToken(request, response, base),
        notice: noticeOf(query),
      };
    }

    private send(response: ConsoleResponse, markup: Markup): string {
      headersFor(response, PAGE_POLICY);
      response.header('content-type', 'text/html; charset=utf-8');
      return markup.text;
    }

    @Get()
    async overview(
      @Req() request: ConsoleRequest,
      @Res({ passthrough: true }) response: ConsoleResponse,
      @Query() query: Record<string, unknown>,
    ) {
      if (this.options.home === 'preview') return this.preview(request, response, query);
      const page = this.page(await this.gate.access(request), request, response);
      const overview = await this.reader.overview(this.options.chartHours);
      return this.send(response, overviewPage(page, overview, this.options));
    }

    /** The newest mails beside the one asked for (`?id=`, the newest by default), rendered. */
    @Get('preview')
    async preview(
      @Req() request: ConsoleRequest,
      @Res({ passthrough: true }) response: ConsoleResponse,
      @Query() query: Record<string, unknown>,
    ) {
      const page = this.page(await this.gate.access(request), request, response);
      const { items } = await this.reader.mails({}, { limit: PREVIEW_LIST_SIZE });
      const asked = typeof query.id === 'string' ? query.id : undefined;
      const id = asked ?? items[0]?.id;
      const timeline = id && isUuid(id) ? await this.reader.timeline(id) : null;
      if (asked && !timeline) throw new NotFoundException(`no mail ${asked}`);
      const selected = timeline && {
        row: timeline.row,
        subject: canReadContent(page) ? (await this.contentOf(timeline.row)).subject : '',
        images: query.images === '1',
        part: query.part === 'text' ? ('text' as const) : ('html' as const),
      };
      return this.send(response, previewPage(page, items, selected));
    }

    /** A mail's content as its send renders it now; a mail that cannot be rendered shows why instead. */
    private async contentOf({ payload, messageId }: OutboxRowWithAttempts): Promise<RenderedContent> {
      if (payload.v === 1) return payload;
      return this.renderer
        .content(messageId, payload, AbortSignal.timeout(PREVIEW_TIMEOUT_MS))
        .catch((error: unknown) => ({
          subject: '(cannot be rendered)',
          text: `This mail cannot be rendered: ${error instanceof Error ? error.message : String(error)}`,
          html: undefined,
        }));
    }

    /** The overview's figures alone, which an open overview fetches every `refreshIntervalMs`. */
    @Get('overview/figures')
    async overviewFigures(@Req() request: ConsoleRequest, @Res({ passthrough: true }) response: ConsoleResponse) {
      const page = this.page(await this.gate.access(request), request, response);
      const overview = await this.reader.overview(this.options.chartHours);
      return this.send(response, overviewFigures(page, overview, this.options.chartHours));
    }

    @Get('assets/console.css')
    async stylesheet(@Req() request: ConsoleRequest, @Res({ passthrough: true }) response: ConsoleResponse) {
      await this.gate.access(request);
      headersFor(response, "default-src 'none'");
      response.header('content-type', 'text/css; charset=utf-8');
      return CONSOLE_CSS;
    }

    @Get('assets/console.js')
    async script(@Req() request: ConsoleRequest, @Res({ passthrough: true }) response: ConsoleResponse) {
      await this.gate.access(request);
      headersFor(response, "default-src 'none'");
      response.header('content-type', 'text/javascript; charset=utf-8');
      return CONSOLE_JS;
    }

    @Get('mails')
    async mails(
      @Req() request: ConsoleRequest,
      @Res({ passthrough: true }) response: ConsoleResponse,
      @Query() query: Record<string, unknown>,
    ) {
      const page = this.page(await this.gate.access(request), request, response, query);
      const mailsQuery = mailsQueryOf(query);
      const result = await badRequestOnInput(() =>
        this.reader.mails(filterOf(mailsQuery), { limit: PAGE_SIZE, before: mailsQuery.before }),
      );
      return this.send(response, mailsPage(page, mailsQuery, result));
    }

    /** A bulk action's page: how many mails the filter matches now, and the form that acts on them. */
    @Get('mails/bulk/:action')
    async bulkPreview(
      @Req() request: ConsoleRequest,
      @Res({ passthrough: true }) response: ConsoleResponse,
      @Param('action') action: string,
      @Query() query: Record<string, unknown>,
    ) {
      const verb = this.mailAction(action);
      const page = this.page(await this.gate.actor(request), request, response);
      const mailsQuery = mailsQueryOf(query);
      const dryRun = await badRequestOnInput(() => this.actions.dryRun(verb, filterOf(mailsQuery)));
      const filter = filterQuery(mailsQuery);
      return this.send(
        response,
        confirmPage(page, {
          title: `${VERBS[verb]} every mail this filter matches`,
          action: `${page.base}/mails/bulk/${verb}`,
          verb: VERBS[verb],
          count: dryRun.count,
          suppressed: dryRun.suppressed,
          filter: Object.fromEntries(new URLSearchParams(filter)),
          back: `${page.base}/mails?${filter}`,
        }),
      );
    }

    @Post('mails/bulk/:action')
    @Redirect()
    async bulk(@Req() request: ConsoleRequest, @Param('action') action: string, @Body() body: Record<string, unknown>) {
      const verb = this.mailAction(action);
      const access = await this.authorizedAction(request, body);
      const mailsQuery = mailsQueryOf(body);
      const ids = await badRequestOnInput(() => this.actions.apply(access, verb, filterOf(mailsQuery), body.reason));
      return { url: `${this.base}/mails?${filterQuery(mailsQuery)}&done=${verb}&n=${ids.length}`, statusCode: 303 };
    }

    @Get('mails/:id')
    async timeline(
      @Req() request: ConsoleRequest,
      @Res({ passthrough: true }) response: ConsoleResponse,
      @Param('id') id: string,
      @Query() query: Record<string, unknown>,
    ) {
      const page = this.page(await this.gate.access(request), request, response, query);
      const timeline = isUuid(id) ? await this.reader.timeline(id) : null;
      if (!timeline) throw new NotFoundException(`no mail ${id}`);
      return this.send(
        response,
        timelinePage(page, timeline, query.images === '1', query.part === 'text' ? 'text' : 'html'),
      );
    }

    /**
     * The message as rendered, for the timeline's sandboxed frame: no script runs in it (CSP sandbox, and the
     * frame's own sandbox attribute), and it loads no remote image unless asked (`?images=1`), since an image
     * fetch tells the sender's server that someone opened the mail.
     */
    @Get('mails/:id/message')
    async message(
      @Req() request: ConsoleRequest,
      @Res({ passthrough: true }) response: ConsoleResponse,
      @Query('images') images: string | undefined,
      @Query('part') part: string | undefined,
      @Param('id') id: string,
    ) {
      const access = await this.gate.access(request);
      this.requireContent(access);
      const row = isUuid(id) ? await this.reader.timeline(id) : null;
      if (!row) throw new NotFoundException(`no mail ${id}`);
      const content = await this.contentOf(row.row);
      const html = part === 'text' ? undefined : content.html;
      const remote = images === '1' ? ' https: http:' : '';
      headersFor(
        response,
        `sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data: cid:${remote}; frame-ancestors 'self'`,
      );
      response.header('content-type', 'text/html; charset=utf-8');
      return html ?? `<pre style="white-space: pre-wrap">${escapeHtml(content.text ?? '')}</pre>`;
    }

    /**
     * The message as the transport would send it (the same MIME, the stored Message-ID), to open in a mail client:
     * rendered now, from the row, with its attachments fetched as a send fetches them.
     */
    @Get('mails/:id/eml')
    async eml(
      @Req() request: ConsoleRequest,
      @Res({ passthrough: true }) response: ConsoleResponse,
      @Param('id') id: string,
    ) {
      this.requireContent(await this.gate.access(request));
      const timeline = isUuid(id) ? await this.reader.timeline(id) : null;
      if (!timeline) throw new NotFoundException(`no mail ${id}`);
      const { payload, messageId } = timeline.row;
      const signal = AbortSignal.timeout(PREVIEW_TIMEOUT_MS);
      const compose = async () => {
        const mail = await this.renderer.render(messageId, payload, signal);
        try {
          return await composeMime(messageId, mail, signal);
        } finally {
          releaseAttachmentStreams(mail);
        }
      };
      const raw = await compose().catch((error: unknown) => {
        throw new UnprocessableEntityException(
          `this mail cannot be rendered: ${error instanceof Error ? error.message : String(error)}`,
        );
      });
      headersFor(response, "default-src 'none'");
      // A StreamableFile: a Buffer returned as it is would be sent as JSON by Nest's Express adapter.
      return new StreamableFile(raw, { type: 'message/rfc822', disposition: `attachment; filename="${id}.eml"` });
    }

    @Get('mails/:id/:action')
    async actionPreview(
      @Req() request: ConsoleRequest,
      @Res({ passthrough: true }) response: ConsoleResponse,
      @Param('id') id: string,
      @Param('action') action: string,
    ) {
      const verb = this.mailAction(action);
      this.requireRowId(id);
      const page = this.page(await this.gate.actor(request), request, response);
      const dryRun = await this.actions.dryRun(verb, { ids: [id] });
      return this.send(
        response,
        confirmPage(page, {
          title: `${VERBS[verb]} mail ${id}`,
          action: `${page.base}/mails/${id}/${verb}`,
          verb: VERBS[verb],
          count: dryRun.count,
          suppressed: dryRun.suppressed,
          filter: {},
          back: `${page.base}/mails/${id}`,
        }),
      );
    }

    @Post('mails/:id/:action')
    @Redirect()
    async act(
      @Req() request: ConsoleRequest,
      @Param('id') id: string,
      @Param('action') action: string,
      @Body() body: Record<string, unknown>,
    ) {
      const verb = this.mailAction(action);
      this.requireRowId(id);
      const access = await this.authorizedAction(request, body);
      const ids = await badRequestOnInput(() => this.actions.apply(access, verb, { ids: [id] }, body.reason));
      return { url: `${this.base}/mails/${id}?done=${verb}&n=${ids.length}`, statusCode: 303 };
    }

    @Get('suppressions')
    async suppressions(
      @Req() request: ConsoleRequest,
      @Res({ passthrough: true }) response: ConsoleResponse,
      @Query() query: Record<string, unknown>,
    ) {
      const access = await this.gate.access(request);
      const page = this.page(access, request, response, query);
      const { content, from, cursor } = addressSearchOf(access, query);
      const list = await badRequestOnInput(() =>
        this.reader.suppressions({ from: from || undefined, after: cursor.after }),
      );
      return this.send(response, suppressionsPage(page, from, list.items, content ? list.next : null));
    }

    @Get('unsubscribes')
    async unsubscribes(
      @Req() request: ConsoleRequest,
      @Res({ passthrough: true }) response: ConsoleResponse,
      @Query() query: Record<string, unknown>,
    ) {
      const access = await this.gate.access(request);
      const page = this.page(access, request, response, query);
      const { content, from, cursor } = addressSearchOf(access, query);
      const list = await badRequestOnInput(() =>
        this.reader.unsubscribes({ from: from || undefined, after: cursor.after, afterCategory: cursor.afterCategory }),
      );
      return this.send(response, unsubscribesPage(page, from, list.items, content ? list.next : null));
    }

    @Get('audit')
    async audit(
      @Req() request: ConsoleRequest,
      @Res({ passthrough: true }) response: ConsoleResponse,
      @Query('before') before: unknown,
    ) {
      const page = this.page(await this.gate.access(request), request, response);
      const entries = await badRequestOnInput(() =>
        this.reader.audit({ limit: AUDIT_PAGE + 1, before: typeof before === 'string' ? before : undefined }),
      );
      const next = entries.length > AUDIT_PAGE ? entries[AUDIT_PAGE - 1].id : null;
      return this.send(response, auditPage(page, entries.slice(0, AUDIT_PAGE), next));
    }

    @Get('suppressions/:verb')
    async suppressionPreview(
      @Req() request: ConsoleRequest,
      @Res({ passthrough: true }) response: ConsoleResponse,
      @Param('verb') verb: string,
      @Query('address') address: unknown,
    ) {
      const add = this.suppressionVerb(verb);
      const access = await this.gate.actor(request);
      this.requireContent(access);
      if (typeof address !== 'string' || address.trim() === '') throw new BadRequestException('address is required');
      const page = this.page(access, request, response);
      return this.send(response, suppressionConfirmPage(page, add ? 'Add' : 'Remove', address.trim()));
    }

    @Post('suppressions/:verb')
    @Redirect()
    async suppression(
      @Req() request: ConsoleRequest,
      @Param('verb') verb: string,
      @Body() body: Record<string, unknown>,
    ) {
      const add = this.suppressionVerb(verb);
      const access = await this.authorizedAction(request, body);
      this.requireContent(access);
      if (add) {
        await badRequestOnInput(() => this.actions.suppress(access, body.address, body.reason));
        return { url: `${this.base}/suppressions?done=suppress`, statusCode: 303 };
      }
      const removed = await badRequestOnInput(() => this.actions.unsuppress(access, body.address, body.reason));
      return { url: `${this.base}/suppressions?done=unsuppress&n=${removed ? 1 : 0}`, statusCode: 303 };
    }

    @Get('unsubscribes/:verb')
    async resubscribePreview(
      @Req() request: ConsoleRequest,
      @Res({ passthrough: true }) response: ConsoleResponse,
      @Param('verb') verb: string,
      @Query() query: Record<string, unknown>,
    ) {
      this.requireResubscribe(verb);
      const access = await this.gate.actor(request);
      this.requireContent(access);
      const unsubscribe = await badRequestOnInput(async () => unsubscribeOf(query.address, query.category));
      const page = this.page(access, request, response);
      return this.send(response, resubscribeConfirmPage(page, unsubscribe));
    }

    @Post('unsubscribes/:verb')
    @Redirect()
    async resubscribe(
      @Req() request: ConsoleRequest,
      @Param('verb') verb: string,
      @Body() body: Record<string, unknown>,
    ) {
      this.requireResubscribe(verb);
      const access = await this.authorizedAction(request, body);
      this.requireContent(access);
      const removed = await badRequestOnInput(() =>
        this.actions.resubscribe(access, body.address, body.category, body.reason),
      );
      return { url: `${this.base}/unsubscribes?done=resubscribe&n=${removed ? 1 : 0}`, statusCode: 303 };
    }

    /** An action posted: allowed (not read-only, the `act` permission), CSRF-checked, and confirmed on its page. */
    private async authorizedAction(request: ConsoleRequest, body: Record<string, unknown> | undefined) {
      const access = await this.gate.actor(request);
      this.gate.checkCsrf(request, body?._csrf);
      if (body?.confirmed !== 'yes') throw new BadRequestException('an action must be confirmed on its page first');
      return access;
    }

    private mailAction(action: string): MailAction {
      if (action === 'requeue' || action === 'cancel') return action;
      throw new NotFoundException(`no action ${action}`);
    }

    private suppressionVerb(verb: string): boolean {
      if (verb === 'add' || verb === 'remove') return verb === 'add';
      throw new NotFoundException(`no suppression action ${verb}`);
    }

    /** The unsubscribes' one action, taking one back. */
    private requireResubscribe(verb: string): void {
      if (verb !== 'resubscribe') throw new NotFoundException(`no unsubscribe action ${verb}`);
    }

    private requireRowId(id: string): void {
      if (!isUuid(id)) throw new NotFoundException(`no mail ${id}`);
    }

    private requireContent(access: ConsoleAccess): void {
      if (!ConsoleGate.may(access, 'content')) {
        throw new ForbiddenException(`${access.actor} may not read mail content or addresses`);
      }
    }
  }
  return ReliableMailConsoleController;
}
