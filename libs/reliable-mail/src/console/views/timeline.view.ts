import type { MailTimeline } from '../console-data.types.js';
import type { MailPayload, OutboxAttempt, OutboxRowWithAttempts, StoredAttachment } from '../../outbox/mail.types.js';
import { CANCELLABLE_STATUSES } from '../../outbox/sql/cancel.js';
import { REQUEUABLE_STATUSES } from '../../outbox/sql/requeue.js';
import type { OutboxFeedback } from '../../outbox/feedback.types.js';
import { html, type Markup } from './html.js';
import { address, canAct, canReadContent, layout, type PageContext, redacted, statusBadge, time } from './layout.js';

/** One line of a mail's life, placed by its time. */
interface Step {
  at: Date;
  kind: string;
  body: Markup;
}

/** A reply as the server gave it, which begins with its code; the code alone where no text came. */
function replyOf(page: PageContext, code: number | null, enhanced: string | null, text: string | null): string {
  const shown = redacted(page, text);
  if (shown && code !== null && shown.startsWith(String(code))) return shown;
  return [code, enhanced, shown].filter((part) => part !== null && part !== '').join(' ');
}

function recipients(page: PageContext, attempt: OutboxAttempt): Markup | string {
  if (!attempt.recipients || attempt.recipients.length === 0) return '';
  return html`<ul class="recipients">
    ${attempt.recipients.map(
      (r) =>
        html`<li>
          ${address(page, r.address)}: <strong>${r.status}</strong>
          <span class="reply">${replyOf(page, r.replyCode, r.enhancedStatus, r.reply)}</span>
          ${r.providerMessageId ? html`<small>provider id ${r.providerMessageId}</small>` : ''}
        </li>`,
    )}
  </ul>`;
}

function attemptStep(page: PageContext, attempt: OutboxAttempt): Step {
  return {
    at: new Date(attempt.startedAt),
    kind: `attempt ${attempt.outcome}`,
    body: html`<strong>Attempt ${attempt.attempt}: ${attempt.outcome}</strong>
      <span class="muted"
        >by
        ${attempt.workerId}${attempt.transport ? ` through ${attempt.transport}` : ''}${
          attempt.durationMs === null ? '' : `, ${attempt.durationMs} ms`
        }</span
      >
      ${
        attempt.replyCode !== null || attempt.reply
          ? html`<div class="reply">${replyOf(page, attempt.replyCode, attempt.enhancedStatus, attempt.reply)}</div>`
          : ''
      }
      ${attempt.providerMessageId ? html`<div>provider message id <code>${attempt.providerMessageId}</code></div>` : ''}
      ${attempt.providerRequestId ? html`<div>provider request id <code>${attempt.providerRequestId}</code></div>` : ''}
      ${recipients(page, attempt)}`,
  };
}

function feedbackStep(page: PageContext, report: OutboxFeedback): Step {
  return {
    at: new Date(report.reportedAt),
    kind: `feedback ${report.kind}`,
    body: html`<strong>${report.kind}${report.bounceType ? ` (${report.bounceType})` : ''}</strong>
      for ${address(page, report.recipient)}, reported by ${report.source}
      ${report.status ? html`<code>${report.status}</code>` : ''}
      <div class="reply">${redacted(page, report.diagnostic)}</div>
      <small class="muted">received ${time(report.receivedAt)}</small>`,
  };
}

function steps(page: PageContext, timeline: MailTimeline): Step[] {
  const { row } = timeline;
  const all: Step[] = [
    {
      at: new Date(row.createdAt),
      kind: 'enqueued',
      body: html`<strong>Enqueued</strong> in lane ${row.lane}
        ${row.idempotencyKey ? html`with idempotency key <code>${redacted(page, row.idempotencyKey)}</code>` : ''}`,
    },
    ...row.attemptLog.map((attempt) => attemptStep(page, attempt)),
    ...row.feedback.map((report) => feedbackStep(page, report)),
    ...timeline.events.map((event) => ({
      at: new Date(event.createdAt),
      kind: 'event',
      body: html`<strong>${event.name}</strong> recorded, not yet confirmed by its listeners
        <span class="muted">(emitted again after ${time(event.lockedUntil)})</span>`,
    })),
    ...timeline.audit.map((entry) => ({
      at: new Date(entry.createdAt),
      kind: 'audit',
      body: html`<strong>${entry.action}</strong> by
        ${entry.actor}${entry.reason ? html`: “${redacted(page, entry.reason)}”` : ''}
        ${entry.rows > 1 ? html`<span class="muted">(with ${entry.rows - 1} other mails)</span>` : ''}`,
    })),
  ];
  if (row.requeuedAt && !timeline.audit.some((entry) => entry.action === 'requeue')) {
    all.push({
      at: new Date(row.requeuedAt),
      kind: 'requeued',
      body: html`<strong>Requeued</strong>: ${row.requeueReason ?? ''}`,
    });
  }
  if (row.sentAt) all.push({ at: new Date(row.sentAt), kind: 'sent', body: html`<strong>Sent</strong>` });
  return all.sort((a, b) => a.at.getTime() - b.at.getTime());
}

function headers(page: PageContext, payload: MailPayload): Markup {
  const list = (values: { address: string; name?: string }[]) =>
    values.map(
      (value, index) =>
        html`${index > 0 ? ', ' : ''}${value.name && canReadContent(page) ? `${value.name} ` : ''}&lt;${address(page, value.address)}&gt;`,
    );
  return html`<table class="headers">
    <tr>
      <th>From</th>
      <td>${list([payload.from])}</td>
    </tr>
    <tr>
      <th>To</th>
      <td>${list(payload.to)}</td>
    </tr>
    ${
      payload.cc.length
        ? html`<tr>
            <th>Cc</th>
            <td>${list(payload.cc)}</td>
          </tr>`
        : ''
    }
    ${
      payload.bcc.length
        ? html`<tr>
            <th>Bcc</th>
            <td>${list(payload.bcc)}</td>
          </tr>`
        : ''
    }
    ${
      payload.replyTo.length
        ? html`<tr>
            <th>Reply-To</th>
            <td>${list(payload.replyTo)}</td>
          </tr>`
        : ''
    }
    ${
      canReadContent(page)
        ? Object.entries(payload.headers).map(
            ([name, value]) =>
              html`<tr>
                <th>${name}</th>
                <td>${value}</td>
              </tr>`,
          )
        : ''
    }
  </table>`;
}

/** Attachments' names and sizes; a name is content, and a fetched one's reference may be a signed URL. */
function attachments(page: PageContext, payload: MailPayload): Markup | string {
  const list = payload.v === 2 ? (payload.attachments ?? []) : [];
  if (list.length === 0) return '';
  const size = (attachment: StoredAttachment) =>
    'content' in attachment
      ? `${Math.floor((attachment.content.length * 3) / 4).toLocaleString('en')} bytes`
      : 'fetched at send';
  return html`<h3>Attachments</h3>
    <ul>
      ${list.map(
        (attachment) =>
          html`<li>
            ${canReadContent(page) ? attachment.filename : html`<span class="hidden-content">name hidden</span>`}
            <span class="muted">${attachment.contentType}, ${size(attachment)}</span>
          </li>`,
      )}
    </ul>`;
}

function actions(page: PageContext, timeline: MailTimeline): Markup | string {
  if (!canAct(page)) return '';
  const { row } = timeline;
  const links = [
    REQUEUABLE_STATUSES.includes(row.status)
      ? html`<a class="button" href="${page.base}/mails/${row.id}/requeue">Requeue…</a>`
      : '',
    CANCELLABLE_STATUSES.includes(row.status)
      ? html`<a class="button" href="${page.base}/mails/${row.id}/cancel">Cancel…</a>`
      : '',
  ];
  return html`<p class="actions">${links}</p>`;
}

export function timelinePage(
  page: PageContext,
  timeline: MailTimeline,
  images: boolean,
  part: 'html' | 'text' = 'html',
): Markup {
  const { row } = timeline;
  const traceId = timeline.traceparent?.split('-')[1];
  return layout(
    page,
    `Mail ${row.id}`,
    '/mails',
    html`<dl class="facts">
        <dt>status</dt>
        <dd data-testid="status">${statusBadge(row.status)}</dd>
        <dt>lane</dt>
        <dd>${row.lane}</dd>
        <dt>Message-ID</dt>
        <dd><code>${row.messageId}</code></dd>
        <dt>attempts</dt>
        <dd>${row.attempts} of ${row.maxAttempts}</dd>
        ${
          row.status === 'pending'
            ? html`<dt>next attempt</dt>
                <dd>${time(row.nextAttemptAt)}</dd>`
            : ''
        }
        ${
          row.providerMessageId
            ? html`<dt>provider message id</dt>
                <dd><code>${row.providerMessageId}</code></dd>`
            : ''
        }
        ${
          traceId
            ? html`<dt>trace id</dt>
                <dd><code data-testid="trace-id">${traceId}</code></dd>`
            : ''
        }
        ${
          row.lastError
            ? html`<dt>last error</dt>
                <dd class="error">${redacted(page, row.lastError)}</dd>`
            : ''
        }
      </dl>
      ${actions(page, timeline)}
      ${
        row.metadata
          ? html`<h2>Business metadata</h2>
              <table class="metadata">
                ${Object.entries(row.metadata).map(
                  ([name, value]) =>
                    html`<tr>
                      <th>${name}</th>
                      <td><code>${JSON.stringify(value)}</code></td>
                    </tr>`,
                )}
              </table>`
          : ''
      }
      <h2>Timeline</h2>
      <ol class="timeline" data-testid="timeline">
        ${steps(page, timeline).map(
          (step) => html`<li class="step" data-kind="${step.kind}">${time(step.at)} ${step.body}</li>`,
        )}
        ${
          timeline.events.length === 0
            ? html`<li class="muted">Every event recorded for this mail was confirmed by its listeners.</li>`
            : ''
        }
      </ol>
      <h2>Message</h2>
      ${messageView(page, row, images, `${page.base}/mails/${row.id}`, part)}`,
  );
}

/**
 * A mail's headers, attachments and its message rendered in a sandboxed frame (html, or its text part), with a
 * link to its .eml; `here` is the page's own URL, which the image and part switches link back to.
 */
export function messageView(
  page: PageContext,
  row: OutboxRowWithAttempts,
  images: boolean,
  here: string,
  part: 'html' | 'text' = 'html',
): Markup {
  const link = (query: Record<string, string | undefined>) => {
    const search = new URLSearchParams(Object.entries(query).filter((entry): entry is [string, string] => !!entry[1]));
    return `${here}${here.includes('?') ? '&' : '?'}${search.toString()}`.replace(/[?&]$/, '');
  };
  const frame = new URLSearchParams({ ...(images ? { images: '1' } : {}), ...(part === 'text' ? { part } : {}) });
  return html`${headers(page, row.payload)} ${attachments(page, row.payload)}
  ${
    canReadContent(page)
      ? html`<p>
            <a href="${link({ images: images ? undefined : '1', part: part === 'text' ? part : undefined })}"
              >${images ? 'Block remote images' : 'Show remote images'}</a
            >
            ·
            <a href="${link({ images: images ? '1' : undefined, part: part === 'text' ? undefined : 'text' })}"
              >${part === 'text' ? 'Show the html' : 'Show the text part'}</a
            >
            · <a href="${page.base}/mails/${row.id}/eml" download>Download as .eml</a>
          </p>
          <iframe
            title="the message as rendered"
            sandbox=""
            referrerpolicy="no-referrer"
            src="${page.base}/mails/${row.id}/message${frame.size > 0 ? `?${frame.toString()}` : ''}"
          ></iframe>`
      : html`<p class="muted">The message’s content needs the content permission.</p>`
  }`;
}
