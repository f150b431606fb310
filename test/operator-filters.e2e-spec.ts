import { describe, expect, it } from '@jest/globals';
import {
  MailOutboxAdmin,
  MailOutboxService,
  MailValidationError,
  OutboxFilterError,
  type OutboxFilter,
} from '@reliable-mail/nestjs';
import fc from 'fast-check';
import { propertyRuns } from './support/property-runs.js';
import { testMailOptions } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';

const mail = { to: 'ann@example.com', subject: 'Your order', text: 'Thanks' };

describe("an operator's filters, pages and periods", () => {
  const bed = useTestBed();

  /** An app without a dispatcher, so that the rows stay as the test puts them, and its admin verbs. */
  async function startAdmin(): Promise<{ admin: MailOutboxAdmin; outbox: MailOutboxService }> {
    const app = await bed.startApp(testMailOptions(bed.smtpUrl, { dispatcher: { enabled: false } }), [], {
      scheduler: false,
    });
    return { admin: app.get(MailOutboxAdmin), outbox: app.get(MailOutboxService) };
  }

  /** Every row's id and status, and the suppression list: what no refused verb may change. */
  async function snapshot(): Promise<unknown> {
    return {
      rows: await bed.execute('select id, status, attempts, requeue_reason from mail_outbox order by id'),
      suppressions: await bed.execute('select address, reason from mail_suppression order by address'),
    };
  }

  /** A dead row with metadata, a sent one, a failed one and a pending one. */
  async function someRows(outbox: MailOutboxService): Promise<void> {
    const statuses = ['dead', 'sent', 'failed', 'pending'];
    for (const [index, status] of statuses.entries()) {
      const { id } = await outbox.enqueue(mail, { metadata: { orderId: index, source: 'orders' } });
      await bed.execute('update mail_outbox set status = $2 where id = $1', [id, status]);
    }
    await bed.execute(
      `insert into mail_suppression (address, reason, source) values ('eve@example.com', 'x', 'operator')`,
    );
  }

  it.each<{ name: string; filter: Record<string, unknown>; field: string }>([
    {
      name: 'a metadata value that is undefined',
      filter: { metadata: { orderId: undefined } },
      field: 'filter.metadata.orderId',
    },
    {
      name: 'one undefined beside a real value',
      filter: { metadata: { source: 'orders', orderId: undefined } },
      field: 'filter.metadata.orderId',
    },
    {
      name: 'an undefined nested in metadata',
      filter: { metadata: { order: { id: undefined } } },
      field: 'filter.metadata.order.id',
    },
    {
      name: 'an undefined in an array of metadata',
      filter: { metadata: { tags: [undefined] } },
      field: 'filter.metadata.tags[0]',
    },
    { name: 'an empty object nested in metadata', filter: { metadata: { order: {} } }, field: 'filter.metadata.order' },
    { name: 'an empty array in metadata', filter: { metadata: { tags: [] } }, field: 'filter.metadata.tags' },
    { name: 'a function in metadata', filter: { metadata: { orderId: () => 7 } }, field: 'filter.metadata.orderId' },
    { name: 'NUL in metadata', filter: { metadata: { source: 'ord\0ers' } }, field: 'filter.metadata.source' },
    {
      name: 'a lone surrogate in a metadata key',
      filter: { metadata: { '\uD800': 1 } },
      field: 'filter.metadata key "\\ud800"',
    },
    {
      name: 'a date past 9999 in metadata',
      filter: { metadata: { at: new Date('+020000-01-01T00:00:00Z') } },
      field: 'filter.metadata.at',
    },
    {
      name: 'metadata nested 1,000 deep',
      filter: { metadata: nested(1_000) },
      field: expect.stringMatching(/^filter\.metadata(\.a)+$/) as never,
    },
    { name: 'a lane with NUL', filter: { lane: 'default\0' }, field: 'filter.lane' },
    {
      name: 'a lone surrogate in a recipient',
      filter: { recipient: 'ann\uDC00@example.com' },
      field: 'filter.recipient',
    },
    {
      name: 'a lone surrogate in an idempotency key',
      filter: { idempotencyKey: 'order-\uD83D' },
      field: 'filter.idempotencyKey',
    },
    {
      name: 'an id that is no string',
      filter: { ids: [{ toString: () => '0192f0e4-6f2b-7c4e-8a3b-1d2e3f4a5b6c' }] },
      field: 'filter.ids',
    },
    {
      name: 'a creation date past 9999',
      filter: { createdAfter: new Date('+200000-01-01T00:00:00Z') },
      field: 'filter.createdAfter',
    },
    {
      name: 'a creation date before year 1',
      filter: { createdBefore: new Date(-8.64e15) },
      field: 'filter.createdBefore',
    },
    { name: 'a bigint', filter: { lane: 10n }, field: 'filter.lane' },
  ])(
    '$name is refused by list, requeue and purge (dry runs too) with OutboxFilterError, and nothing changes',
    async ({ filter, field }) => {
      const { admin, outbox } = await startAdmin();
      await someRows(outbox);
      const before = await snapshot();
      const verbs: Array<[string, () => Promise<unknown>]> = [
        ['list', () => admin.list(filter)],
        ['requeue', () => admin.requeue(filter, 'a reason')],
        ['requeue dry run', () => admin.requeue(filter, 'a reason', { dryRun: true })],
        ['purge', () => admin.purge(filter)],
        ['purge dry run', () => admin.purge(filter, { dryRun: true })],
      ];
      for (const [verb, run] of verbs) {
        const error = await run().then(
          (result) => new Error(`${verb} took the filter and returned ${JSON.stringify(result)?.slice(0, 200)}`),
          (thrown: unknown) => thrown,
        );
        expect([verb, error]).toEqual([verb, expect.any(OutboxFilterError)]);
        expect(error).toBeInstanceOf(MailValidationError);
        expect(error).toMatchObject({ field });
      }
      expect(await snapshot()).toEqual(before);
    },
  );

  it.each<{ name: string; run: (admin: MailOutboxAdmin) => Promise<unknown>; field: string; error?: unknown }>([
    {
      name: 'list before an id that is no uuid',
      run: (admin) => admin.list({}, { before: 'not-a-uuid' }),
      field: 'page.before',
    },
    {
      name: 'list with a limit that is NaN',
      run: (admin) => admin.list({}, { limit: Number.NaN }),
      field: 'page.limit',
    },
    { name: 'list with a limit of 0', run: (admin) => admin.list({}, { limit: 0 }), field: 'page.limit' },
    { name: 'list with a fractional limit', run: (admin) => admin.list({}, { limit: 2.5 }), field: 'page.limit' },
    {
      name: 'list with a limit as text',
      run: (admin) => admin.list({}, { limit: '10' as never }),
      field: 'page.limit',
    },
    { name: 'list with a page of null', run: (admin) => admin.list({}, null as never), field: 'page' },
    { name: 'suppressions after NUL', run: (admin) => admin.listSuppressions({ after: 'a\0' }), field: 'page.after' },
    {
      name: 'suppressions after a number',
      run: (admin) => admin.listSuppressions({ after: 5 as never }),
      field: 'page.after',
    },
    {
      name: 'suppressions with a negative limit',
      run: (admin) => admin.listSuppressions({ limit: -1 }),
      field: 'page.limit',
    },
    {
      name: 'an export from an invalid date',
      run: (admin) => exportAll(admin, { from: new Date(Number.NaN), to: new Date() }),
      field: 'period.from',
    },
    {
      name: 'an export to a date past 9999',
      run: (admin) => exportAll(admin, { from: new Date(0), to: new Date(8.64e15) }),
      field: 'period.to',
    },
    { name: 'an export without a period', run: (admin) => exportAll(admin, undefined as never), field: 'period' },
    {
      name: 'an export whose end is before its start',
      run: (admin) => exportAll(admin, { from: new Date(), to: new Date(0) }),
      field: 'period.to',
    },
    {
      name: 'a requeue reason with NUL',
      run: (admin) => admin.requeue({ status: 'dead' }, 'fixed\0'),
      field: 'reason',
      error: MailValidationError,
    },
    {
      name: 'a suppression reason with a lone surrogate',
      run: (admin) => admin.suppress('bob@example.com', 'asked \uD800'),
      field: 'reason',
      error: MailValidationError,
    },
    {
      name: 'a suppressed address with NUL',
      run: (admin) => admin.suppress('bob\0@example.com', 'asked'),
      field: 'address',
      error: MailValidationError,
    },
  ])(
    '$name is refused with a typed error naming $field, and nothing changes',
    async ({ run, field, error = OutboxFilterError }) => {
      const { admin, outbox } = await startAdmin();
      await someRows(outbox);
      const before = await snapshot();
      await expect(run(admin)).rejects.toBeInstanceOf(error);
      await expect(run(admin)).rejects.toMatchObject({ field });
      expect(await snapshot()).toEqual(before);
    },
  );

  it('real filters and pages still select what they name: a metadata value, a page after the last id of the one before', async () => {
    const { admin, outbox } = await startAdmin();
    await someRows(outbox);
    const [first, second] = await admin.list({}, { limit: 2 });
    expect((await admin.list({}, { before: second.id, limit: 5_000 })).map((row) => row.id)).not.toContain(first.id);
    expect(await admin.list({}, { before: second.id })).toHaveLength(2);
    expect(await admin.list({ metadata: { source: 'orders', orderId: 1 } })).toHaveLength(1);
  });

  it('property: no filter, however hostile, raises a database error or matches a row it does not name', async () => {
    const { admin, outbox } = await startAdmin();
    // The sentinel: the only closed (and requeueable) row, and nothing any generated filter names matches it.
    const sentinel = await outbox.enqueue(
      { ...mail, to: 'sentinel@example.com' },
      { idempotencyKey: 'sentinel', metadata: { sentinel: true } },
    );
    await bed.execute(
      `update mail_outbox set status = 'dead', lane = 'sentinel', created_at = '2000-01-01' where id = $1`,
      [sentinel.id],
    );
    await outbox.enqueue(mail, { metadata: { orderId: 1 } });

    await fc.assert(
      fc.asyncProperty(hostileFilter, async (filter) => {
        // Only list takes a filter that gives no field: it lists every row, as asked.
        const namesNothing = Object.values(filter).every((value) => value === undefined);
        const verbs = [
          ...(namesNothing ? [] : [() => admin.list(filter as OutboxFilter, { limit: 1_000 })]),
          () => admin.requeue(filter as OutboxFilter, 'property', { dryRun: true }),
          () => admin.purge(filter as OutboxFilter, { dryRun: true }),
          () => admin.purge(filter as OutboxFilter),
        ];
        for (const verb of verbs) {
          let value: Array<{ id: string } | string> | number;
          try {
            value = await verb();
          } catch (error) {
            if (error instanceof OutboxFilterError) continue;
            throw error;
          }
          // Only the sentinel is closed, and requeueable: a purge counts it, a requeue or list names it.
          if (typeof value === 'number') expect(value).toBe(0);
          else expect(value.map((item) => (typeof item === 'string' ? item : item.id))).not.toContain(sentinel.id);
        }
      }),
      propertyRuns('operator filters'),
    );
    expect(await bed.execute(`select status from mail_outbox where id = $1`, [sentinel.id])).toEqual([
      { status: 'dead' },
    ]);
  });
});

function nested(depth: number): Record<string, unknown> {
  let value: Record<string, unknown> = { a: 1 };
  for (let level = 1; level < depth; level++) value = { a: value };
  return value;
}

async function exportAll(admin: MailOutboxAdmin, period: { from: Date; to: Date }): Promise<string[]> {
  const lines: string[] = [];
  for await (const line of admin.exportJsonLines(period)) lines.push(line);
  return lines;
}

// The filters of the property: every field drawn from hostile values (lone surrogates, NUL, a megabyte, undefined,
// empty and deep objects, bigints, extreme numbers and dates), and from real values that cannot name the sentinel
// (no text with "sentinel" in it, no status `dead`, creation dates that leave out 2000-01-01).

const anyText = fc
  .oneof(
    { arbitrary: fc.string({ unit: 'binary', maxLength: 40 }), weight: 6 },
    {
      arbitrary: fc.constantFrom('', ' ', '\0', '\uD800', '\uDC00x', 'a\0b', 'ann@example.com', 'default'),
      weight: 3,
    },
    {
      arbitrary: fc
        .string({ unit: 'binary', minLength: 1, maxLength: 4 })
        .map((unit) => unit.repeat(Math.ceil(1_000_000 / unit.length))),
      weight: 1,
    },
  )
  .filter((text) => !text.toLowerCase().includes('sentinel') && text !== 'dead');

const anyNumber = fc.oneof(
  fc.double(),
  fc.integer(),
  fc.constantFrom(Number.NaN, Infinity, -Infinity, -0, 1e308, Number.MAX_SAFE_INTEGER + 2),
);

/** No Date: a creation date given to the wrong field would be a real filter, and might name the sentinel. */
const leaf = fc.oneof(
  anyText,
  anyNumber,
  fc.boolean(),
  fc.constantFrom(null, undefined, {}, [], 10n, () => 1, Symbol('s')),
);

const metadata = fc.oneof(
  fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      leaf,
      fc.date({ noInvalidDate: false }),
      fc.array(tie('value'), { maxLength: 3 }),
      fc.dictionary(anyText, tie('value'), { maxKeys: 3 }),
    ),
  })).value,
  fc.integer({ min: 90, max: 400 }).map(nested),
);

const anyValue = fc.oneof(leaf, fc.array(leaf, { maxLength: 3 }), metadata);

const notDead = fc.constantFrom('pending', 'sending', 'sent', 'failed', 'cancelled', 'expired', 'suppressed');

const hostileFilter = fc.record(
  {
    ids: fc.oneof(anyValue, fc.array(fc.oneof(fc.uuid(), anyText, anyValue), { maxLength: 3 })),
    status: fc.oneof(anyValue, notDead, fc.array(fc.oneof(notDead, anyText), { maxLength: 3 })),
    lane: fc.oneof(anyValue, anyText),
    recipient: fc.oneof(anyValue, anyText),
    idempotencyKey: fc.oneof(anyValue, anyText),
    metadata,
    createdAfter: fc.oneof(anyValue, fc.date({ min: new Date('2000-01-02T00:00:00Z'), noInvalidDate: false })),
    createdBefore: fc.oneof(anyValue, fc.date({ max: new Date('1999-12-31T00:00:00Z'), noInvalidDate: false })),
    // No filter field: refused too.
    lanes: anyValue,
  },
  { requiredKeys: [] },
);
