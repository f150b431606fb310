// A dispatcher in a process of its own, for tests that kill it. Arguments: a JSON object of
// { databaseUrl, smtpUrl, crashOnSentEvent?, options? }. It prints `ready` once started and `sent-event <id>` for
// every EmailSentEvent; with crashOnSentEvent it kills itself with SIGKILL inside the first listener call, after
// the settle committed and before the event could be confirmed.
import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import { EMAIL_SENT_EVENT, type EmailSentEvent } from '../../libs/reliable-mail/src/index.js';
import { createTestApp, testMailOptions } from './test-app.js';

interface ProcessArguments {
  databaseUrl: string;
  smtpUrl: string;
  crashOnSentEvent?: boolean;
  options?: Parameters<typeof testMailOptions>[1];
}

const args = JSON.parse(process.argv[2]) as ProcessArguments;

@Injectable()
class SentEventReporter {
  @OnEvent(EMAIL_SENT_EVENT)
  onSent(event: EmailSentEvent): void {
    process.stdout.write(`sent-event ${event.id}\n`);
    if (args.crashOnSentEvent) process.kill(process.pid, 'SIGKILL');
  }
}

await createTestApp(args.databaseUrl, testMailOptions(args.smtpUrl, args.options), [SentEventReporter]);
process.stdout.write('ready\n');
