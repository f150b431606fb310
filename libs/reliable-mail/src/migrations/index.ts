import { Migration20261130000000_CreateOutbox } from './Migration20261130000000_create-outbox.js';
import { Migration20261130120000_LighterRows } from './Migration20261130120000_lighter-rows.js';
import { Migration20261201000000_RecipientState } from './Migration20261201000000_recipient-state.js';
import { Migration20261202000000_ProviderIds } from './Migration20261202000000_provider-ids.js';
import { Migration20261203000000_Feedback } from './Migration20261203000000_feedback.js';
import { Migration20261204000000_RequestMessageIds } from './Migration20261204000000_request-message-ids.js';

/** reliable-mail's migrations, in order; add them to the app's `migrations.migrationsList`. */
export const reliableMailMigrations = [
  { name: 'Migration20261130000000_reliable-mail_create-outbox', class: Migration20261130000000_CreateOutbox },
  { name: 'Migration20261130120000_reliable-mail_lighter-rows', class: Migration20261130120000_LighterRows },
  { name: 'Migration20261201000000_reliable-mail_recipient-state', class: Migration20261201000000_RecipientState },
  { name: 'Migration20261202000000_reliable-mail_provider-ids', class: Migration20261202000000_ProviderIds },
  { name: 'Migration20261203000000_reliable-mail_feedback', class: Migration20261203000000_Feedback },
  {
    name: 'Migration20261204000000_reliable-mail_request-message-ids',
    class: Migration20261204000000_RequestMessageIds,
  },
];
