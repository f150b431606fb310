import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { metrics } from '@opentelemetry/api';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { MailOutboxService } from '@reliable-mail/nestjs';
import { KeepingDestination } from '../support/keeping-destination.js';
import { testMailOptions, waitFor } from '../support/test-app.js';
import { useTestBed } from '../support/test-bed.js';

class OnDemandReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

describe("the relay's metrics", () => {
  const bed = useTestBed();
  const reader = new OnDemandReader();

  beforeAll(() => {
    metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
  });

  afterAll(() => {
    metrics.disable();
  });

  it('count the publications a broker confirmed and those put off, and gauge what each destination is owed', async () => {
    const destination = new KeepingDestination('metered');
    await bed.startSmtp();
    const app = await bed.startApp(
      testMailOptions(bed.smtpUrl, { relay: { destinations: [destination], pollIntervalMs: 100 } }),
      [],
      { eventRecorder: false },
    );
    const outbox = app.get(MailOutboxService);
    const refused = await outbox.enqueue({ to: 'large@example.com', subject: 'Hi', text: 'x' });
    destination.refused.add(refused.id);
    for (let i = 0; i < 3; i++) await outbox.enqueue({ to: `m${i}@example.com`, subject: 'Hi', text: 'x' });
    await waitFor('the three others published', () => destination.published.length === 3);

    const points = async (name: string): Promise<Array<[Record<string, unknown>, unknown]>> => {
      const { resourceMetrics } = await reader.collect();
      const all = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics);
      return (all.find((metric) => metric.descriptor.name === name)?.dataPoints ?? []).map(
        (point): [Record<string, unknown>, unknown] => [point.attributes, point.value],
      );
    };
    await waitFor('the refused event put off at least once', async () =>
      (await points('reliable_mail.relay.publications')).some(([attributes]) => attributes.outcome === 'deferred'),
    );
    expect(await points('reliable_mail.relay.publications')).toEqual(
      expect.arrayContaining([[{ destination: 'metered', outcome: 'confirmed' }, 3]]),
    );
    expect(await points('reliable_mail.relay.owed')).toEqual([[{ destination: 'metered' }, 1]]);
  });
});
