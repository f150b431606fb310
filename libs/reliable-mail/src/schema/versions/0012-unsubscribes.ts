import type { SchemaVersion } from './schema-version.js';

/**
 * One-click unsubscribes (RFC 8058): a recipient unsubscribed from a category of non-transactional mail gets none
 * of the lanes of that category, and still gets transactional mail. A table of its own beside the suppression list,
 * whose entries hold for every mail: its primary key stays the address, so the code of before this version (its
 * `on conflict (address)`) keeps running against it in a rolling deploy, and never reads an unsubscribe as a
 * suppression of transactional mail. `outbox_id` names the mail whose link was used; no foreign key, since the
 * unsubscribe outlives the row.
 */
export const unsubscribes: SchemaVersion = {
  version: 12,
  name: 'unsubscribes',
  servesCodeFrom: 1,
  statements: (t) => [
    `create table ${t.unsubscribe} (
        "address" text not null,
        "category" text not null,
        "outbox_id" uuid null,
        "created_at" timestamptz not null default now(),
        primary key ("address", "category")
      )`,
  ],
};
