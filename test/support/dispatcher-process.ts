// A dispatcher in a process of its own, for tests that kill it or that time what it sends from outside the test's
// process. Arguments: a JSON object of { databaseUrl, smtpUrl, crashOnSentEvent?, sesEndpoint?, options? }; with
// sesEndpoint it sends through an SES transport pointed there. It prints `ready` once started and `sent-event <id>` for
// every EmailSentEvent; with crashOnSentEvent it kills itself with SIGKILL inside the first listener call, after
// the settle committed and before the event could be confirmed.
import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import { EMAIL_SENT_EVENT, type EmailSentEvent, SesMailTransport } from '../../libs/reliable-mail/src/index.js';
import { createTestApp, testMailOptions } from './test-app.js';

interface ProcessArguments {
  databaseUrl: string;
  smtpUrl: string;
  crashOnSentEvent?: boolean;
  sesEndpoint?: string;
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

const transport = args.sesEndpoint
  ? {
      transport: new SesMailTransport({
        region: 'eu-west-1',
        endpoint: args.sesEndpoint,
        credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      }),
    }
  : {};
await createTestApp(args.databaseUrl, testMailOptions(args.smtpUrl, { ...args.options, ...transport }), [
  SentEventReporter,
]);
process.stdout.write('ready\n');
