import { createOutbox } from './0001-create-outbox.js';
import { lighterRows } from './0002-lighter-rows.js';
import { recipientState } from './0003-recipient-state.js';
import { providerIds } from './0004-provider-ids.js';
import { feedback } from './0005-feedback.js';
import { requestMessageIds } from './0006-request-message-ids.js';
import { compressedPayloads } from './0007-compressed-payloads.js';
import { consoleTables } from './0008-console.js';
import { templateSources } from './0009-template-sources.js';
import { sendQuotas } from './0010-send-quotas.js';
import { attemptTransport } from './0011-attempt-transport.js';
import { unsubscribes } from './0012-unsubscribes.js';
import { partitionDays } from './0013-partition-days.js';
import { eventRelay } from './0014-event-relay.js';
import type { SchemaVersion } from './schema-version.js';

/** Every version of reliable-mail's schema, oldest first; version n is at index n - 1. */
export const SCHEMA_VERSIONS: readonly SchemaVersion[] = [
  createOutbox,
  lighterRows,
  recipientState,
  providerIds,
  feedback,
  requestMessageIds,
  compressedPayloads,
  consoleTables,
  templateSources,
  sendQuotas,
  attemptTransport,
  unsubscribes,
  partitionDays,
  eventRelay,
];

export type { SchemaVersion } from './schema-version.js';
