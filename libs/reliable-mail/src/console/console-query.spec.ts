import { describe, expect, it } from '@jest/globals';
import { OutboxFilterError } from '../errors.js';
import { filterOf, mailsQueryOf } from './console-query.js';
import { html, raw } from './views/html.js';

describe('the Mails URL as a filter', () => {
  it.each([
    ['orderId=1234', { orderId: 1234 }],
    ['orderId="1234"', { orderId: '1234' }],
    ['paid=true', { paid: true }],
    ['tenant=acme', { tenant: 'acme' }],
    ['note=a=b', { note: 'a=b' }],
    // A JSON object or array would narrow by structure nobody typed: it is the text it was.
    ['tags=["a"]', { tags: '["a"]' }],
    ['empty=', { empty: '' }],
  ])('reads metadata %s as %j', (meta, metadata) => {
    expect(filterOf({ meta })).toEqual({ metadata });
  });

  it('refuses metadata without a name', () => {
    expect(() => filterOf({ meta: '=1' })).toThrow(OutboxFilterError);
    expect(() => filterOf({ meta: 'orderId' })).toThrow(OutboxFilterError);
  });

  it('reads a time without a zone as UTC, and refuses one that is no time', () => {
    expect(filterOf({ from: '2026-12-01T09:30' })).toEqual({ createdAfter: new Date('2026-12-01T09:30:00Z') });
    expect(filterOf({ to: '2026-12-01T09:30:00+01:00' })).toEqual({
      createdBefore: new Date('2026-12-01T08:30:00Z'),
    });
    expect(() => filterOf({ from: 'yesterday' })).toThrow(OutboxFilterError);
  });

  it('names each field as the admin filter does, and takes the first of a repeated parameter', () => {
    const query = mailsQueryOf({
      status: ['dead', 'sent'],
      lane: ' bulk ',
      key: 'order-1',
      recipient: '',
      unknown: 'x',
      before: '0190e4a0-0000-7000-8000-000000000000',
    });
    expect(query).toEqual({
      status: 'dead',
      lane: 'bulk',
      key: 'order-1',
      before: '0190e4a0-0000-7000-8000-000000000000',
    });
    expect(filterOf(query)).toEqual({ status: 'dead', lane: 'bulk', idempotencyKey: 'order-1' });
  });
});

describe('html', () => {
  it('escapes every value, at any depth of a list, and keeps markup it made', () => {
    const subject = `<img src=x onerror="alert(1)">'&`;
    expect(html`<td title="${subject}">${[subject, html`<b>${subject}</b>`]}</td>`.text).toBe(
      '<td title="&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&#39;&amp;">' +
        '&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&#39;&amp;<b>&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&#39;&amp;</b></td>',
    );
    expect(html`${null}${undefined}${false}${0}${raw('<br>')}`.text).toBe('0<br>');
  });
});
