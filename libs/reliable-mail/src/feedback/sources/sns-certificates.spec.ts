import { describe, expect, it } from '@jest/globals';
import { CERT_URL, certificateUrl, useSnsTestServer } from '../../../../../test/support/sns-test-server.js';
import {
  FAILURE_MEMORY_MS,
  MAX_CONCURRENT_FETCHES,
  SnsCertificates,
  SnsCertificateUnavailableError,
} from './sns-certificates.js';

describe('SnsCertificates, against a stand-in of the SNS certificate host', () => {
  const sns = useSnsTestServer();

  /** Certificates kept in a Map, on a clock of the test's. */
  function certificates() {
    const clock = { time: 0 };
    const loader = new SnsCertificates(new Map<string, string>(), sns().agent, 5_000, () => clock.time);
    const fetches = () => sns().requests.filter((path) => path.endsWith('.pem')).length;
    return { loader, clock, fetches };
  }

  it(`a failed fetch is remembered for ${FAILURE_MEMORY_MS / 1_000} s: its URL is refused at once, then fetched again`, async () => {
    const { loader, clock, fetches } = certificates();
    const before = fetches();
    sns().certificateHost.replies.push({ status: 503, body: 'Service Unavailable' });
    await expect(loader.load(CERT_URL)).rejects.toThrow(
      new SnsCertificateUnavailableError('the certificate host answered 503'),
    );
    clock.time += FAILURE_MEMORY_MS - 1;
    await expect(loader.load(CERT_URL)).rejects.toThrow(/^the certificate host answered 503, less than 15 s ago/);
    expect(fetches() - before).toBe(1);
    clock.time += 1;
    await expect(loader.load(CERT_URL)).resolves.toMatch(/^-----BEGIN CERTIFICATE-----/);
    expect(fetches() - before).toBe(2);
  });

  it(`fetches at most ${MAX_CONCURRENT_FETCHES} certificates at once: one more is refused at once, and fetched once there is room`, async () => {
    const { loader, fetches } = certificates();
    sns().certificateHost.delayMs = 300;
    const before = fetches();
    const urls = Array.from({ length: MAX_CONCURRENT_FETCHES + 1 }, (_, index) => certificateUrl(`c${index}`));
    const loads = urls.slice(0, -1).map((url) => loader.load(url));
    await expect(loader.load(urls.at(-1)!)).rejects.toThrow(
      new SnsCertificateUnavailableError(`${MAX_CONCURRENT_FETCHES} other certificates are being fetched`),
    );
    // Those under way, and another need of one of them, share its fetch.
    const again = loader.load(urls[0]);
    await Promise.all([...loads, again]);
    expect(fetches() - before).toBe(MAX_CONCURRENT_FETCHES);
    await expect(loader.load(urls.at(-1)!)).resolves.toMatch(/^-----BEGIN CERTIFICATE-----/);
  });
});
