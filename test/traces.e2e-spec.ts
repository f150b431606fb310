import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import {
  context,
  createTraceState,
  ROOT_CONTEXT,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { MailFeedbackService } from '@reliable-mail/nestjs';
import { dsnMessage } from './support/dsn-message.js';
import { waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';
import { startWebhookApp } from './support/webhook-app.js';

// An app with the OpenTelemetry SDK, as one that traces its requests has: the spans are kept in memory to be read.
const exporter = new InMemorySpanExporter();
const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
const contextManager = new AsyncLocalStorageContextManager();
const shop = trace.getTracer('shop');

const credentials = { username: 'postmark', password: 's3cret-webhook-password' };
const authorized = {
  'content-type': 'application/json',
  authorization: `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`,
};

function postmarkBounce(postmarkId: string, email: string): string {
  return JSON.stringify({
    RecordType: 'Bounce',
    MessageStream: 'outbound',
    ID: 4323372036,
    Type: 'HardBounce',
    TypeCode: 1,
    MessageID: postmarkId,
    Details: 'smtp;550 5.1.1 The email account that you tried to reach does not exist.',
    Email: email,
    BouncedAt: '2026-12-03T10:00:00Z',
  });
}

/** Runs `work` in a new active span of the app's own, as its code for a request would, and gives that span. */
async function inSpan<T>(name: string, work: () => Promise<T>): Promise<{ result: T; span: SpanContext }> {
  return shop.startActiveSpan(name, async (span) => {
    try {
      return { result: await work(), span: span.spanContext() };
    } finally {
      span.end();
    }
  });
}

const spansNamed = (name: string): ReadableSpan[] => exporter.getFinishedSpans().filter((span) => span.name === name);
const sendSpanOf = (id: string) =>
  spansNamed('reliable-mail send').find((span) => span.attributes['reliable_mail.outbox_id'] === id)!;
const linkedTo = (span: ReadableSpan) => span.links.map((link) => link.context);
const sameSpan = ({ traceId, spanId }: SpanContext) => expect.objectContaining({ traceId, spanId });

describe('traces: the enqueue, the send and the feedback on a mail are one trace', () => {
  const bed = useTestBed();

  beforeAll(() => {
    context.setGlobalContextManager(contextManager.enable());
    trace.setGlobalTracerProvider(provider);
  });

  afterAll(async () => {
    trace.disable();
    context.disable();
    await provider.shutdown();
  });

  beforeEach(() => exporter.reset());

  const storedContext = (id: string) =>
    bed.execute('select traceparent, tracestate from mail_outbox where id = $1', [id]);

  it("one trace from the request that placed the order to the provider's bounce, its tracestate kept", async () => {
    const postmarkId = randomUUID();
    const { app, outbox, post } = await startWebhookApp(
      bed,
      { postmark: { basicAuth: credentials } },
      { script: { onData: () => ({ code: 250, text: `2.0.0 Ok: queued as ${postmarkId}` }) } },
    );
    // The order's request came with a traceparent and a tracestate of the caller's.
    const caller: SpanContext = {
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
      traceFlags: TraceFlags.SAMPLED,
      isRemote: true,
      traceState: createTraceState('vendor=a1'),
    };
    const { result: mail, span: order } = await context.with(trace.setSpanContext(ROOT_CONTEXT, caller), () =>
      inSpan('POST /orders', () => outbox.enqueue({ to: 'gone@example.org', subject: 'Your order', text: 'Thanks' })),
    );
    expect(order.traceId).toBe(caller.traceId);
    expect(await storedContext(mail.id)).toEqual([
      { traceparent: `00-${order.traceId}-${order.spanId}-01`, tracestate: 'vendor=a1' },
    ]);

    await waitFor('sent', () => app.events.sent.length === 1);
    const answer = await post('postmark', postmarkBounce(postmarkId, 'gone@example.org'), authorized);
    expect(await answer.json()).toMatchObject({ stored: 1, unlinked: 0 });

    const send = sendSpanOf(mail.id);
    const [report] = spansNamed('reliable-mail feedback');
    for (const span of [send, report]) {
      expect(span.spanContext().traceId).toBe(order.traceId);
      expect(span.parentSpanContext).toEqual(sameSpan(order));
      expect(linkedTo(span)).toEqual([sameSpan(order)]);
      expect(span.spanContext().traceState?.serialize()).toBe('vendor=a1');
    }
    expect(send).toMatchObject({
      kind: SpanKind.PRODUCER,
      status: { code: SpanStatusCode.UNSET },
      attributes: {
        'reliable_mail.outbox_id': mail.id,
        'reliable_mail.message_id': mail.messageId,
        'reliable_mail.lane': 'default',
        'reliable_mail.attempt': 1,
        'reliable_mail.outcome': 'sent',
      },
    });
    expect(report).toMatchObject({
      kind: SpanKind.CONSUMER,
      attributes: {
        'reliable_mail.feedback.kind': 'bounced',
        'reliable_mail.feedback.source': 'postmark',
        'reliable_mail.outbox_id': mail.id,
      },
    });
    expect(spansNamed('reliable-mail feedback')).toHaveLength(1);
  });

  it('a mail enqueued outside any span stores no context, and its send is the root span of a trace of its own', async () => {
    const { app, outbox } = await bed.start();
    const untraced = await outbox.enqueue({ to: 'ann@example.org', subject: 'Welcome', text: 'Hello' });
    const { result: traced, span: signup } = await inSpan('POST /signup', () =>
      outbox.enqueue({ to: 'bob@example.org', subject: 'Welcome', text: 'Hello' }),
    );
    await waitFor('both sent', () => app.events.sent.length === 2);

    expect(await storedContext(untraced.id)).toEqual([{ traceparent: null, tracestate: null }]);
    const root = sendSpanOf(untraced.id);
    expect(root.parentSpanContext).toBeUndefined();
    expect(root.links).toEqual([]);
    expect(root.spanContext().traceId).not.toBe(signup.traceId);
    expect(sendSpanOf(traced.id).spanContext().traceId).toBe(signup.traceId);
  });

  it("a batch enqueued in a span: each send in its trace, a refused one an error; a DSN linked to the reader's span too", async () => {
    const { app, outbox } = await bed.start({
      onRcptTo: (to) => (to.startsWith('gone') ? { code: 550, text: '5.1.1 No such user' } : undefined),
    });
    const { result: mails, span: batch } = await inSpan('nightly digest', () =>
      outbox.enqueueMany([
        { mail: { to: 'ann@example.org', subject: 'Digest', text: 'News' } },
        { mail: { to: 'gone@example.org', subject: 'Digest', text: 'News' } },
      ]),
    );
    await waitFor('sent and failed', () => app.events.sent.length === 1 && app.events.failed.length === 1);

    const [sent, refused] = mails.map((mail) => sendSpanOf(mail.id));
    for (const span of [sent, refused]) {
      expect(span.spanContext().traceId).toBe(batch.traceId);
      expect(linkedTo(span)).toEqual([sameSpan(batch)]);
    }
    expect(sent.status.code).toBe(SpanStatusCode.UNSET);
    expect(refused.attributes['reliable_mail.outcome']).toBe('permanent');
    expect(refused.status).toEqual({ code: SpanStatusCode.ERROR, message: 'permanent 550' });

    const received = bed.smtp.received.find((message) => message.messageId === mails[0].messageId)!;
    const dsn = dsnMessage({
      to: received.sender,
      original: { raw: received.raw, as: 'headers' },
      recipients: [{ address: 'ann@example.org', action: 'delivered', status: '2.0.0', diagnostic: '250 2.0.0 Ok' }],
    });
    const { span: reader } = await inSpan('read the bounce mailbox', () => app.get(MailFeedbackService).ingestDsn(dsn));

    const [report] = spansNamed('reliable-mail feedback');
    expect(report.spanContext().traceId).toBe(batch.traceId);
    expect(report.parentSpanContext).toEqual(sameSpan(batch));
    expect(linkedTo(report)).toEqual([sameSpan(batch), sameSpan(reader)]);
    expect(report.attributes).toEqual({
      'reliable_mail.feedback.kind': 'delivered',
      'reliable_mail.feedback.source': 'dsn',
      'reliable_mail.outbox_id': mails[0].id,
    });
  });
});
