import type { MailPage } from '../console-data.types.js';
import { MAILS_QUERY_FIELDS, type MailsQuery } from '../console-query.js';
import { OUTBOX_STATUSES } from '../../outbox/mail.types.js';
import { html, type Markup } from './html.js';
import { address, canAct, canReadContent, layout, type PageContext, redacted, statusBadge, time } from './layout.js';

/** The filter's fields as a query string, without the page's cursor: what the next page and a bulk action keep. */
export function filterQuery(query: MailsQuery): string {
  const params = new URLSearchParams();
  for (const field of MAILS_QUERY_FIELDS) {
    const value = query[field];
    if (value) params.set(field, value);
  }
  return params.toString();
}

/** A mail's business metadata on one line, `orderId=1234 source="orders"`, as the metadata filter takes it. */
function metadataLine(metadata: Record<string, unknown> | null): string {
  return Object.entries(metadata ?? {})
    .map(([name, value]) => `${name}=${JSON.stringify(value)}`)
    .join(' ');
}

function field(name: keyof MailsQuery, label: string, query: MailsQuery, hint = ''): Markup {
  return html`<label>${label}<input name="${name}" value="${query[name] ?? ''}" placeholder="${hint}" /></label>`;
}

function filterForm(page: PageContext, query: MailsQuery): Markup {
  return html`<form method="get" action="${page.base}/mails" class="filter" data-testid="filter">
    <label
      >status
      <select name="status">
        <option value="">any</option>
        ${OUTBOX_STATUSES.map(
          (status) => html`<option value="${status}" ${query.status === status ? 'selected' : ''}>${status}</option>`,
        )}
      </select>
    </label>
    ${field('lane', 'lane', query)} ${field('recipient', 'recipient', query, 'ann@example.com')}
    ${field('key', 'idempotency key', query)} ${field('messageId', 'Message-ID', query, '<…@…>')}
    ${field('providerMessageId', 'provider message id', query)} ${field('meta', 'metadata', query, 'orderId=1234')}
    <label>created from<input name="from" type="datetime-local" step="1" value="${query.from ?? ''}" /></label>
    <label>created before<input name="to" type="datetime-local" step="1" value="${query.to ?? ''}" /></label>
    <button type="submit">Search</button>
    <a href="${page.base}/mails">clear</a>
  </form>`;
}

export function mailsPage(page: PageContext, query: MailsQuery, result: MailPage): Markup {
  const filter = filterQuery(query);
  const filtered = filter !== '';
  return layout(
    page,
    'Mails',
    '/mails',
    html`${filterForm(page, query)}
      ${
        canAct(page) && filtered
          ? html`<p class="bulk">
              On every mail this filter matches:
              <a href="${page.base}/mails/bulk/requeue?${filter}">requeue…</a>
              <a href="${page.base}/mails/bulk/cancel?${filter}">cancel…</a>
              (a count of what would change comes first)
            </p>`
          : ''
      }
      <table class="mails" data-testid="mails">
        <thead>
          <tr>
            <th>created</th>
            <th>status</th>
            <th>lane</th>
            <th>to</th>
            <th>subject</th>
            <th>attempts</th>
            <th>metadata</th>
            <th>last error</th>
          </tr>
        </thead>
        <tbody>
          ${
            result.items.length === 0
              ? html`<tr>
                  <td colspan="8" class="muted">No mail matches.</td>
                </tr>`
              : result.items.map(
                  (item) =>
                    html`<tr data-id="${item.id}">
                      <td><a href="${page.base}/mails/${item.id}">${time(item.createdAt)}</a></td>
                      <td>${statusBadge(item.status)}</td>
                      <td>${item.lane}</td>
                      <td>${item.to.map((to, index) => html`${index > 0 ? ', ' : ''}${address(page, to)}`)}</td>
                      <td>
                        ${
                          canReadContent(page)
                            ? item.subject ||
                              (item.template ? html`<span class="muted">template ${item.template}</span>` : '')
                            : html`<span class="hidden-content">hidden</span>`
                        }
                      </td>
                      <td>${item.attempts}</td>
                      <td class="metadata">${metadataLine(item.metadata)}</td>
                      <td class="error">${redacted(page, item.lastError)}</td>
                    </tr>`,
                )
          }
        </tbody>
      </table>
      ${
        result.next
          ? html`<p>
              <a rel="next" href="${page.base}/mails?${filter}${filtered ? '&' : ''}before=${result.next}">Older →</a>
            </p>`
          : ''
      }`,
  );
}
