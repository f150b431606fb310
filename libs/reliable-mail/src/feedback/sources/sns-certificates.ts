import { X509Certificate } from 'node:crypto';
import { type Agent, get } from 'node:https';

/** A signing certificate PEM is under 2 KB; a body past this is no certificate, and is not read further. */
const MAX_CERTIFICATE_BYTES = 64 * 1024;

/** The signing certificate could not be had: the host failed or answered something else. Not the sender's fault. */
export class SnsCertificateUnavailableError extends Error {}

/** Where the certificates are kept once checked: sns-payload-validator's own cache, which its `validate` reads. */
export interface CertificateCache {
  get(url: string): string | undefined;
  set(url: string, certificate: string): unknown;
}

/**
 * How long a failed fetch is remembered, and its URL answered at once with the failure (a 5xx): an unauthenticated
 * request names the URL, so without this each could make the server fetch again. Shorter than the 20 s SNS waits
 * between retries by default, so that its first retry fetches again.
 */
export const FAILURE_MEMORY_MS = 15_000;
/**
 * The most certificates fetched at once; a request needing another is answered 503 at once. SNS signs with one
 * certificate per region (a new one every few years), but the URL is the request's: its 32 characters are the
 * sender's to choose, so any number of distinct fetches could be asked for.
 */
export const MAX_CONCURRENT_FETCHES = 8;
/** The most failed URLs remembered, the oldest forgotten first: each distinct URL adds one. */
const MAX_REMEMBERED_FAILURES = 1_000;

/**
 * SNS's signing certificates, fetched through `agent` and checked before they are kept: a 200 whose body is a PEM
 * X.509 certificate. sns-payload-validator would keep whatever its URL answered (a 503's error page) and refuse
 * every message signed with it as a bad signature until restart; SNS does not retry a 401, so the reports were lost.
 * A failed fetch keeps no certificate, and is remembered for `FAILURE_MEMORY_MS`, after which a request (SNS's
 * retry) fetches again; requests that need the same certificate at the same time share one fetch, and at most
 * `MAX_CONCURRENT_FETCHES` distinct ones run at once.
 */
export class SnsCertificates {
  private readonly fetching = new Map<string, Promise<string>>();
  /** Until when (on `now`'s clock) each URL whose fetch failed is not fetched again, and why it failed. */
  private readonly failed = new Map<string, { until: number; reason: string }>();

  constructor(
    private readonly cache: CertificateCache,
    private readonly agent: Agent | undefined,
    private readonly timeoutMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** The certificate at `url` (already pinned to AWS's SNS hosts), cached once it checked out. */
  async load(url: string): Promise<string> {
    const cached = this.cache.get(url);
    if (cached !== undefined) return cached;
    const fetching = this.fetching.get(url);
    if (fetching) return fetching;
    const failure = this.failed.get(url);
    if (failure && failure.until > this.now()) {
      throw new SnsCertificateUnavailableError(
        `${failure.reason}, less than ${FAILURE_MEMORY_MS / 1_000} s ago; not fetched again yet`,
      );
    }
    if (this.fetching.size >= MAX_CONCURRENT_FETCHES) {
      throw new SnsCertificateUnavailableError(`${MAX_CONCURRENT_FETCHES} other certificates are being fetched`);
    }
    const started = this.fetch(url)
      .then(
        (pem) => {
          this.failed.delete(url);
          return pem;
        },
        (error: unknown) => {
          this.remember(url, (error as Error).message);
          throw error;
        },
      )
      .finally(() => this.fetching.delete(url));
    this.fetching.set(url, started);
    return started;
  }

  private remember(url: string, reason: string): void {
    this.failed.delete(url);
    this.failed.set(url, { until: this.now() + FAILURE_MEMORY_MS, reason });
    if (this.failed.size > MAX_REMEMBERED_FAILURES) this.failed.delete(this.failed.keys().next().value!);
  }

  private async fetch(url: string): Promise<string> {
    const { status, body } = await this.request(url);
    if (status !== 200) throw new SnsCertificateUnavailableError(`the certificate host answered ${status}`);
    const pem = body.toString('utf8');
    if (!pem.trimStart().startsWith('-----BEGIN CERTIFICATE-----')) {
      throw new SnsCertificateUnavailableError('the certificate host answered something that is not a PEM certificate');
    }
    try {
      new X509Certificate(pem);
    } catch (error) {
      throw new SnsCertificateUnavailableError(`the certificate does not parse (${(error as Error).message})`);
    }
    this.cache.set(url, pem);
    return pem;
  }

  private request(url: string): Promise<{ status: number; body: Buffer }> {
    return new Promise((resolve, reject) => {
      const fail = (error: Error) =>
        reject(new SnsCertificateUnavailableError(`fetching it failed: ${error.message}`, { cause: error }));
      const request = get(url, { agent: this.agent, signal: AbortSignal.timeout(this.timeoutMs) }, (response) => {
        const chunks: Buffer[] = [];
        let length = 0;
        response.on('data', (chunk: Buffer) => {
          length += chunk.length;
          if (length > MAX_CERTIFICATE_BYTES) {
            response.destroy();
            resolve({ status: response.statusCode ?? 0, body: Buffer.alloc(0) });
          } else chunks.push(chunk);
        });
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks) }));
        response.on('error', fail);
      });
      request.on('error', fail);
    });
  }
}
