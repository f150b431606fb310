import {
  context,
  createTraceState,
  isSpanContextValid,
  type Link,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  type SpanOptions,
  trace,
} from '@opentelemetry/api';
import { PACKAGE_VERSION } from '../startup/package-version.js';

/**
 * The W3C trace context (the `traceparent` and `tracestate` headers) of the span that was active when a row was
 * enqueued: stored with the row, so that its send and the feedback on it, in other processes and much later, are
 * spans of the trace that placed the order.
 */
export interface StoredTraceContext {
  traceparent: string | null;
  tracestate: string | null;
}

/** What a row stores when no span was active: always so without an OpenTelemetry SDK. */
export const NO_TRACE_CONTEXT: StoredTraceContext = Object.freeze({ traceparent: null, tracestate: null });

/**
 * The active span's context, as the row stores it. An enqueue is a hot path: without an SDK this is one lookup in
 * the no-op context and no allocation.
 */
export function activeTraceContext(): StoredTraceContext {
  const spanContext = trace.getSpanContext(context.active());
  if (!spanContext || !isSpanContextValid(spanContext)) return NO_TRACE_CONTEXT;
  const flags = (spanContext.traceFlags & 0xff).toString(16).padStart(2, '0');
  return {
    traceparent: `00-${spanContext.traceId}-${spanContext.spanId}-${flags}`,
    tracestate: spanContext.traceState?.serialize() || null,
  };
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ALL_ZEROS = /^0+$/;

/**
 * The span context a stored `traceparent` names, or null for anything but a version 00 one with a trace id and a
 * span id that are not all zeros. Never throws: a value damaged in the table costs its mail its trace, not its send.
 */
export function parseTraceparent(traceparent: unknown, tracestate: unknown): SpanContext | null {
  if (typeof traceparent !== 'string') return null;
  const parts = TRACEPARENT.exec(traceparent);
  if (!parts || ALL_ZEROS.test(parts[1]) || ALL_ZEROS.test(parts[2])) return null;
  const spanContext: SpanContext = {
    traceId: parts[1],
    spanId: parts[2],
    traceFlags: Number.parseInt(parts[3], 16),
    isRemote: true,
  };
  // The API's parser drops the members it cannot read and never throws.
  if (typeof tracestate === 'string' && tracestate !== '') spanContext.traceState = createTraceState(tracestate);
  return spanContext;
}

/**
 * Starts a span of a row's life (its send, a report on it): a child of the span the row was enqueued in, and linked
 * to it, since the enqueue ended long before; a root span when the row stores no usable context. Its parent is never
 * the active span, which is the dispatcher's or a webhook request's, of another trace. The tracer is asked for
 * each span: a no-op one until an SDK is registered, whenever that happens.
 */
export function startRowSpan(name: string, stored: Partial<StoredTraceContext>, options: SpanOptions): Span {
  const enqueuedIn = parseTraceparent(stored.traceparent, stored.tracestate);
  const links: Link[] = enqueuedIn ? [{ context: enqueuedIn }, ...(options.links ?? [])] : (options.links ?? []);
  const parent = enqueuedIn ? trace.setSpanContext(ROOT_CONTEXT, enqueuedIn) : ROOT_CONTEXT;
  return trace.getTracer('@reliable-mail/nestjs', PACKAGE_VERSION).startSpan(name, { ...options, links }, parent);
}
