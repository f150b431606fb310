import type { AuditEntry } from '../console-data.types.js';
import type { Suppression, Unsubscribe } from '../../outbox/operations.types.js';
import type { UnsubscribeCursor } from '../../unsubscribe/sql/unsubscribes.js';
import { html, type Markup } from './html.js';
import { actionForm, address, canAct, canReadContent, layout, type PageContext, redacted, time } from './layout.js';

/** What an action would do, counted before it is done, and the form that does it. */
export interface ActionPreview {
  title: string;
  /** Where the form posts: the same path as the page. */
  action: string;
  /** The verb, as the button says it. */
  verb: string;
  /** How many mails it would change now (the dry run). */
  count: number;
  /** Recipients among them on the suppression list: requeued, they stay suppressed. */
  suppressed: string[];
  /** The filter's fields, posted again as they were shown. */
  filter: Record<string, string>;
  back: string;
}

const reasonField = html`<label
  >reason (for the audit and the next operator)
  <input name="reason" required maxlength="500" />
</label>`;

export function confirmPage(page: PageContext, preview: ActionPreview): Markup {
  return layout(
    page,
    preview.title,
    '/mails',
    html`<p data-testid="dry-run">
        This would ${preview.verb.toLowerCase()} <strong>${preview.count.toLocaleString('en')}</strong>
        mail${preview.count === 1 ? '' : 's'} as of now.
      </p>
      ${
        preview.suppressed.length > 0
          ? html`<div class="warning" role="alert" data-testid="suppressed-warning">
              These recipients are on the suppression list and stay suppressed: they will not get the mail unless taken
              off it first.
              <ul>
                ${preview.suppressed.map((value) => html`<li>${address(page, value)}</li>`)}
              </ul>
            </div>`
          : ''
      }
      ${
        preview.count === 0
          ? ''
          : actionForm(
              page,
              preview.action,
              html`${Object.entries(preview.filter).map(
                ([name, value]) => html`<input type="hidden" name="${name}" value="${value}" />`,
              )}${reasonField}`,
              `${preview.verb} ${preview.count.toLocaleString('en')}`,
            )
      }
      <p><a href="${preview.back}">${preview.count === 0 ? 'Back' : 'Cancel, go back'}</a></p>`,
  );
}

export function suppressionConfirmPage(page: PageContext, verb: 'Add' | 'Remove', value: string): Markup {
  const title = verb === 'Add' ? 'Add to the suppression list' : 'Remove from the suppression list';
  return layout(
    page,
    title,
    '/suppressions',
    html`<p>
        ${verb === 'Add' ? 'No mail will be sent to' : 'Mail may be sent again to'}
        <strong>${address(page, value)}</strong>.
      </p>
      ${actionForm(
        page,
        `${page.base}/suppressions/${verb === 'Add' ? 'add' : 'remove'}`,
        html`<input type="hidden" name="address" value="${value}" />${reasonField}`,
        verb,
      )}
      <p><a href="${page.base}/suppressions">Cancel, go back</a></p>`,
  );
}

/** A list's search, which starts it from an address. */
function addressSearchForm(page: PageContext, section: string, search: string): Markup {
  return html`<form method="get" action="${page.base}${section}" class="filter">
    <label>address from<input name="from" value="${search}" placeholder="ann@" /></label>
    <button type="submit">Search</button>
  </form>`;
}

export function suppressionsPage(
  page: PageContext,
  search: string,
  suppressions: Suppression[],
  next: string | null,
): Markup {
  return layout(
    page,
    'Suppressions',
    '/suppressions',
    html`${addressSearchForm(page, '/suppressions', search)}
      ${
        canAct(page)
          ? html`<form method="get" action="${page.base}/suppressions/add" class="filter">
              <label>address<input name="address" type="email" required /></label>
              <button type="submit">Add…</button>
            </form>`
          : ''
      }
      <table data-testid="suppressions">
        <thead>
          <tr>
            <th>address</th>
            <th>source</th>
            <th>reason</th>
            <th>since</th>
            <th></th>
          </tr>
        </thead>
        <tbody>
          ${
            suppressions.length === 0
              ? html`<tr>
                  <td colspan="5" class="muted">No address.</td>
                </tr>`
              : suppressions.map(
                  (s) =>
                    html`<tr>
                      <td>${address(page, s.address)}</td>
                      <td>
                        ${s.source}${s.outboxId ? html` (<a href="${page.base}/mails/${s.outboxId}">mail</a>)` : ''}
                      </td>
                      <td>${redacted(page, s.reason)}</td>
                      <td>${time(s.createdAt)}</td>
                      <td>
                        ${
                          canAct(page) && canReadContent(page)
                            ? html`<a href="${page.base}/suppressions/remove?address=${encodeURIComponent(s.address)}"
                                >remove…</a
                              >`
                            : ''
                        }
                      </td>
                    </tr>`,
                )
          }
        </tbody>
      </table>
      ${next ? html`<p><a rel="next" href="${page.base}/suppressions?from=${encodeURIComponent(search)}&after=${encodeURIComponent(next)}">More →</a></p>` : ''}`,
  );
}

export function resubscribeConfirmPage(
  page: PageContext,
  unsubscribe: Pick<Unsubscribe, 'address' | 'category'>,
): Markup {
  return layout(
    page,
    'Take back an unsubscribe',
    '/unsubscribes',
    html`<p>
        Mail of the category <strong>${unsubscribe.category}</strong> may be sent again to
        <strong>${address(page, unsubscribe.address)}</strong>, who unsubscribed from it. Take it back only when they
        asked for that mail again.
      </p>
      ${actionForm(
        page,
        `${page.base}/unsubscribes/resubscribe`,
        html`<input type="hidden" name="address" value="${unsubscribe.address}" />
          <input type="hidden" name="category" value="${unsubscribe.category}" />${reasonField}`,
        'Take back',
      )}
      <p><a href="${page.base}/unsubscribes">Cancel, go back</a></p>`,
  );
}

export function unsubscribesPage(
  page: PageContext,
  search: string,
  unsubscribes: Unsubscribe[],
  next: UnsubscribeCursor | null,
): Markup {
  const more =
    next && new URLSearchParams({ from: search, after: next.address, afterCategory: next.category }).toString();
  return layout(
    page,
    'Unsubscribes',
    '/unsubscribes',
    html`<p class="muted">
        Who unsubscribed from a category of non-transactional mail by its one-click link: no mail of that category goes
        to them; transactional mail still does.
      </p>
      ${addressSearchForm(page, '/unsubscribes', search)}
      <table data-testid="unsubscribes">
        <thead>
          <tr>
            <th>address</th>
            <th>category</th>
            <th>mail</th>
            <th>since</th>
            <th></th>
          </tr>
        </thead>
        <tbody>
          ${
            unsubscribes.length === 0
              ? html`<tr>
                  <td colspan="5" class="muted">No unsubscribe.</td>
                </tr>`
              : unsubscribes.map(
                  (unsubscribe) =>
                    html`<tr>
                      <td>${address(page, unsubscribe.address)}</td>
                      <td>${unsubscribe.category}</td>
                      <td>
                        ${unsubscribe.outboxId ? html`<a href="${page.base}/mails/${unsubscribe.outboxId}">the mail</a>` : '—'}
                      </td>
                      <td>${time(unsubscribe.createdAt)}</td>
                      <td>
                        ${
                          canAct(page) && canReadContent(page)
                            ? html`<a
                                href="${page.base}/unsubscribes/resubscribe?${new URLSearchParams({
                                  address: unsubscribe.address,
                                  category: unsubscribe.category,
                                }).toString()}"
                                >take back…</a
                              >`
                            : ''
                        }
                      </td>
                    </tr>`,
                )
          }
        </tbody>
      </table>
      ${more ? html`<p><a rel="next" href="${page.base}/unsubscribes?${more}">More →</a></p>` : ''}`,
  );
}

export function auditPage(page: PageContext, entries: AuditEntry[], next: string | null): Markup {
  return layout(
    page,
    'Audit',
    '/audit',
    html`<p class="muted">Every action taken through the console, newest first.</p>
      <table data-testid="audit">
        <thead>
          <tr>
            <th>when</th>
            <th>who</th>
            <th>what</th>
            <th>why</th>
            <th>mails</th>
          </tr>
        </thead>
        <tbody>
          ${
            entries.length === 0
              ? html`<tr>
                  <td colspan="5" class="muted">No action yet.</td>
                </tr>`
              : entries.map(
                  (entry) =>
                    html`<tr>
                      <td>${time(entry.createdAt)}</td>
                      <td>${entry.actor}</td>
                      <td>${entry.action}</td>
                      <td>${redacted(page, entry.reason)}</td>
                      <td>
                        ${
                          entry.firstOutboxId
                            ? html`<a href="${page.base}/mails/${entry.firstOutboxId}"
                                >${entry.rows === 1 ? 'the mail' : `${entry.rows.toLocaleString('en')} mails, the first`}</a
                              >`
                            : '—'
                        }
                      </td>
                    </tr>`,
                )
          }
        </tbody>
      </table>
      ${next ? html`<p><a rel="next" href="${page.base}/audit?before=${next}">Older →</a></p>` : ''}`,
  );
}
