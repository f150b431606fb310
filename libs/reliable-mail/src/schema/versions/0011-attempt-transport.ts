import type { SchemaVersion } from './schema-version.js';

/**
 * The transport that made each attempt, in a lane of several (`FailoverTransport`: SES, then Postmark): an operator
 * reads which provider took a mail, or failed it, and feedback is linked whichever sent it. Null for a lane of one
 * transport and for the attempts before this version.
 */
export const attemptTransport: SchemaVersion = {
  version: 11,
  name: 'attempt-transport',
  servesCodeFrom: 1,
  statements: (t) => [`alter table ${t.attempt} add column "transport" text null`],
};
