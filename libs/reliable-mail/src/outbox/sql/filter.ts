import type { OutboxFilter } from '../operations.types.js';

/**
 * Turns an operator's filter into a where clause over `mail_outbox o` whose placeholders start at `$first`; the
 * SQL never holds a value.
 */
export function whereOf(filter: OutboxFilter, first: number): { sql: string; values: unknown[] } {
  const clauses: string[] = [];
  const values: unknown[] = [];
  const add = (clause: (placeholder: string) => string, value: unknown) => {
    values.push(value);
    clauses.push(clause(`$${first + values.length - 1}`));
  };
  if (filter.ids) add((p) => `o.id = any(${p}::uuid[])`, filter.ids);
  if (filter.status) add((p) => `o.status = any(${p}::text[])`, [filter.status].flat());
  if (filter.lane) add((p) => `o.lane = ${p}`, filter.lane);
  if (filter.recipient) {
    add(
      (p) => `exists (select 1 from jsonb_array_elements((o.payload->'to') || (o.payload->'cc') || (o.payload->'bcc')) r
                      where lower(r->>'address') = lower(${p}))`,
      filter.recipient,
    );
  }
  if (filter.idempotencyKey) add((p) => `o.idempotency_key = ${p}`, filter.idempotencyKey);
  if (filter.metadata) add((p) => `o.metadata @> ${p}::jsonb`, JSON.stringify(filter.metadata));
  if (filter.createdAfter) add((p) => `o.created_at >= ${p}`, filter.createdAfter);
  if (filter.createdBefore) add((p) => `o.created_at < ${p}`, filter.createdBefore);
  return { sql: clauses.length > 0 ? clauses.join(' and ') : 'true', values };
}
