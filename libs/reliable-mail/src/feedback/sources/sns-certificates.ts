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
 * SNS's signing certificates, fetched through `agent` and checked before they are kept: a 200 whose body is a PEM
 * X.509 certificate. sns-payload-validator would keep whatever its URL answered (a 503's error page) and refuse
 * every message signed with it as a bad signature until restart; SNS does not retry a 401, so the reports were lost.
 * A failed fetch keeps nothing, so the next request (SNS's retry) fetches again; requests that need the same
 * certificate at the same time share one fetch.
 */
export class SnsCertificates {
  private readonly fetching = new Map<string, Promise<string>>();

  constructor(
    private readonly cache: CertificateCache,
    private readonly agent: Agent | undefined,
    private readonly timeoutMs: number,
  ) {}

  /** The certificate at `url` (already pinned to AWS's SNS hosts), cached once it checked out. */
  async load(url: string): Promise<string> {
    const cached = this.cache.get(url);
    if (cached !== undefined) return cached;
    let fetching = this.fetching.get(url);
    if (!fetching) {
      fetching = this.fetch(url).finally(() => this.fetching.delete(url));
      this.fetching.set(url, fetching);
    }
    return fetching;
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
