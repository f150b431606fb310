import { describe, expect, it } from '@jest/globals';
import { MailOutboxService } from '@reliable-mail/nestjs';
import { MailDispatcher } from '../../libs/reliable-mail/src/dispatch/mail.dispatcher.js';
import { waitFor } from '../support/test-app.js';
import { OWN_SETTINGS, ownStatements, usePgBouncerBed } from './pgbouncer-bed.js';

// A session pooler gives each client connection a server session while it lasts, but takes no startup parameter it
// does not track: the settings are SET on each connection instead, and LISTEN works through it.
describe('behind PgBouncer in session mode (database.pooler: session)', () => {
  // A server connection for each client: reliable-mail's pool, its listener and its start's, and MikroORM's.
  const bed = usePgBouncerBed({ poolMode: 'session', poolSize: 40 });

  it("reliable-mail's own statements run under its settings, SET once on each connection", async () => {
    const app = await bed.startApp({ dispatcher: { enabled: false } });
    expect(await ownStatements(app)).toEqual({ settings: OWN_SETTINGS, pastTimeout: '57014' });
  });

  it('an idle dispatcher, listening through PgBouncer, wakes at the commit', async () => {
    // A poll every 10 minutes: only the NOTIFY brings the mail out within the wait.
    const app = await bed.startApp({ dispatcher: { pollIntervalMs: 600_000 } });
    const dispatcher = app.get(MailDispatcher);
    await waitFor('the listener to listen', () => dispatcher.wakeUpState.listening);
    const { messageId } = await app.get(MailOutboxService).enqueue({ to: 'ann@example.com', subject: 'Hi', text: 'x' });
    await waitFor('the mail', () => bed.smtp.received.some((message) => message.messageId === messageId));
  });
});
