import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  context,
  createTraceState,
  INVALID_SPAN_CONTEXT,
  ROOT_CONTEXT,
  type SpanContext,
  trace,
  TraceFlags,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { activeTraceContext, NO_TRACE_CONTEXT, parseTraceparent, startRowSpan } from './trace-context.js';

const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
const spanId = '00f067aa0ba902b7';
const traceparent = `00-${traceId}-${spanId}-01`;

describe('parseTraceparent', () => {
  it('reads a version 00 traceparent as a remote span context, with its tracestate', () => {
    const parsed = parseTraceparent(traceparent, 'vendor=a1,other=b2');
    expect(parsed).toMatchObject({ traceId, spanId, traceFlags: TraceFlags.SAMPLED, isRemote: true });
    expect(parsed!.traceState!.serialize()).toBe('vendor=a1,other=b2');
    expect(parseTraceparent(`00-${traceId}-${spanId}-00`, null)).toEqual({
      traceId,
      spanId,
      traceFlags: TraceFlags.NONE,
      isRemote: true,
    });
  });

  it('keeps the flags it does not know, and no tracestate when there is none', () => {
    expect(parseTraceparent(`00-${traceId}-${spanId}-ff`, '')).toEqual({
      traceId,
      spanId,
      traceFlags: 0xff,
      isRemote: true,
    });
  });

  it('keeps what it can read of a damaged tracestate', () => {
    expect(parseTraceparent(traceparent, 'vendor=a1,=,NOT A MEMBER')!.traceState!.serialize()).toBe('vendor=a1');
  });

  it.each([
    ['another version', `01-${traceId}-${spanId}-01`],
    ['the invalid version ff', `ff-${traceId}-${spanId}-01`],
    ['a trace id of zeros', `00-${'0'.repeat(32)}-${spanId}-01`],
    ['a span id of zeros', `00-${traceId}-${'0'.repeat(16)}-01`],
    ['upper-case hex', `00-${traceId.toUpperCase()}-${spanId}-01`],
    ['a short trace id', `00-${traceId.slice(1)}-${spanId}-01`],
    ['a long span id', `00-${traceId}-${spanId}0-01`],
    ['one hex digit of flags', `00-${traceId}-${spanId}-1`],
    ['flags that are not hex', `00-${traceId}-${spanId}-0g`],
    ['a field more (allowed only in later versions)', `${traceparent}-00`],
    ['a line break after it', `${traceparent}\n`],
    ['spaces around it', ` ${traceparent} `],
    ['other separators', traceparent.replaceAll('-', '_')],
    ['an empty string', ''],
  ])('gives no parent for %s', (_, value) => {
    expect(parseTraceparent(value, 'vendor=a1')).toBeNull();
  });

  it.each([null, undefined, 42, {}, ['00']])('gives no parent for a value that is no string: %p', (value) => {
    expect(parseTraceparent(value, null)).toBeNull();
  });
});

describe('with an OpenTelemetry SDK', () => {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  const contextManager = new AsyncLocalStorageContextManager();

  beforeAll(() => {
    context.setGlobalContextManager(contextManager.enable());
    trace.setGlobalTracerProvider(provider);
  });

  afterAll(async () => {
    trace.disable();
    context.disable();
    await provider.shutdown();
  });

  const within = <T>(spanContext: SpanContext, run: () => T): T =>
    context.with(trace.setSpanContext(ROOT_CONTEXT, spanContext), run);

  it('activeTraceContext: nothing outside a span, or in an invalid one', () => {
    expect(activeTraceContext()).toBe(NO_TRACE_CONTEXT);
    expect(within(INVALID_SPAN_CONTEXT, activeTraceContext)).toBe(NO_TRACE_CONTEXT);
  });

  it('activeTraceContext: the active span as W3C headers, which parseTraceparent reads back', () => {
    const traceState = createTraceState('vendor=a1,other=b2');
    const active: SpanContext = { traceId, spanId, traceFlags: TraceFlags.SAMPLED, traceState };
    const stored = within(active, activeTraceContext);
    expect(stored).toEqual({ traceparent, tracestate: 'vendor=a1,other=b2' });
    expect(parseTraceparent(stored.traceparent, stored.tracestate)).toMatchObject({
      traceId,
      spanId,
      traceFlags: TraceFlags.SAMPLED,
      isRemote: true,
    });
    expect(within({ traceId, spanId, traceFlags: TraceFlags.NONE }, activeTraceContext)).toEqual({
      traceparent: `00-${traceId}-${spanId}-00`,
      tracestate: null,
    });
  });

  it('startRowSpan: a child of the stored context and linked to it, whatever span is active', () => {
    exporter.reset();
    const other: SpanContext = { traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), traceFlags: TraceFlags.SAMPLED };
    within(other, () => startRowSpan('row span', { traceparent, tracestate: 'vendor=a1' }, {}).end());
    const [span] = exporter.getFinishedSpans();
    expect(span.spanContext().traceId).toBe(traceId);
    expect(span.parentSpanContext).toMatchObject({ traceId, spanId, isRemote: true });
    expect(span.links.map((link) => link.context)).toEqual([expect.objectContaining({ traceId, spanId })]);
    expect(span.spanContext().traceState?.serialize()).toBe('vendor=a1');
  });

  it('startRowSpan: a root span with no link when the stored traceparent is missing or unreadable', () => {
    exporter.reset();
    const other: SpanContext = { traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), traceFlags: TraceFlags.SAMPLED };
    within(other, () => {
      startRowSpan('none', { traceparent: null, tracestate: null }, {}).end();
      startRowSpan('damaged', { traceparent: `00-${traceId}-${spanId}`, tracestate: 'vendor=a1' }, {}).end();
    });
    const spans = exporter.getFinishedSpans();
    expect(spans.map((span) => span.name)).toEqual(['none', 'damaged']);
    for (const span of spans) {
      expect(span.parentSpanContext).toBeUndefined();
      expect(span.links).toEqual([]);
      expect([traceId, other.traceId]).not.toContain(span.spanContext().traceId);
    }
  });
});
