import { afterAll, afterEach, beforeAll } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { createSign, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent, createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type ConnectionOptions } from 'node:tls';

export const SNS_HOST = 'sns.us-east-1.amazonaws.com';
export const CERT_URL = `https://${SNS_HOST}/SimpleNotificationService-0123456789abcdef0123456789abcdef.pem`;
/** Another URL of the host's, for a test that needs certificates fetched apart. */
export const certificateUrl = (name: string) =>
  `https://${SNS_HOST}/SimpleNotificationService-${name.padEnd(32, '0').slice(0, 32)}.pem`;

/** The fields SNS signs, in order, per message type (AWS's "Verifying the signatures of Amazon SNS messages"). */
const SIGNED_FIELDS: Record<string, string[]> = {
  Notification: ['Message', 'MessageId', 'Subject', 'Timestamp', 'TopicArn', 'Type'],
  SubscriptionConfirmation: ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'],
};

/**
 * What the certificate URLs answer: `replies` first, one per request to any of them, then the certificate; each after
 * `delayMs`.
 */
export interface CertificateHost {
  replies: Array<{ status: number; body: string }>;
  delayMs: number;
}

/** Routes every HTTPS connection to the test server, which presents a certificate for AWS's SNS host. */
class LoopbackAgent extends Agent {
  constructor(
    private readonly port: number,
    ca: string,
  ) {
    super({ ca });
  }

  override createConnection(options: ConnectionOptions) {
    // The TLS check still runs against the host asked for (the servername), with the test's own CA.
    return connect({ ...options, host: '127.0.0.1', port: this.port });
  }
}

/**
 * Stands in for AWS's SNS hosts: a key and certificate made for the test (openssl), an HTTPS server that serves
 * the signing certificate and answers subscription confirmations, and an agent that reaches it under AWS's host
 * name. The webhook source is given the agent; it fetches and checks as it would against AWS.
 */
export class SnsTestServer {
  readonly agent: Agent;

  private constructor(
    private readonly server: Server,
    private readonly key: string,
    cert: string,
    /** The paths (with query) of every request the server got. */
    readonly requests: string[],
    /** How the certificate host answers: the next replies in order (then the certificate), and after how long. */
    readonly certificateHost: CertificateHost,
  ) {
    this.agent = new LoopbackAgent((server.address() as AddressInfo).port, cert);
  }

  static async start(): Promise<SnsTestServer> {
    const dir = mkdtempSync(join(tmpdir(), 'sns-test-'));
    try {
      execFileSync('openssl', [
        'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', `/CN=${SNS_HOST}`,
        '-addext', `subjectAltName=DNS:${SNS_HOST}`,
        '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
      ], { stdio: 'ignore' }); // prettier-ignore
      const key = readFileSync(join(dir, 'key.pem'), 'utf8');
      const cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
      const requests: string[] = [];
      const certificateHost: CertificateHost = { replies: [], delayMs: 0 };
      const server = createServer({ key, cert }, (request, response) => {
        requests.push(request.url ?? '');
        // Every signing certificate's path serves the one certificate: a test may sign with several URLs.
        if (!/^\/SimpleNotificationService-\w{32}\.pem$/.test(request.url ?? '')) {
          return response.end('<ConfirmSubscriptionResponse/>');
        }
        const { status, body } = certificateHost.replies.shift() ?? { status: 200, body: cert };
        setTimeout(() => response.writeHead(status).end(body), certificateHost.delayMs);
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return new SnsTestServer(server, key, cert, requests, certificateHost);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  /** A signed SNS notification carrying `message` (an SES notification) from `topicArn`. */
  notification(topicArn: string, message: unknown, overrides: Record<string, string> = {}): Record<string, string> {
    return this.sign({
      Type: 'Notification',
      MessageId: randomUUID(),
      TopicArn: topicArn,
      Message: typeof message === 'string' ? message : JSON.stringify(message),
      Timestamp: new Date().toISOString(),
      SigningCertURL: CERT_URL,
      ...overrides,
    });
  }

  subscriptionConfirmation(topicArn: string, subscribeHost = SNS_HOST): Record<string, string> {
    const token = randomUUID();
    return this.sign({
      Type: 'SubscriptionConfirmation',
      MessageId: randomUUID(),
      Token: token,
      TopicArn: topicArn,
      Message: `You have chosen to subscribe to the topic ${topicArn}.`,
      SubscribeURL: `https://${subscribeHost}/?Action=ConfirmSubscription&TopicArn=${topicArn}&Token=${token}`,
      Timestamp: new Date().toISOString(),
      SigningCertURL: CERT_URL,
    });
  }

  /** Signs as SNS does: SHA1withRSA for version 1, SHA256withRSA for version 2. */
  sign(message: Record<string, string>, version: '1' | '2' = '1'): Record<string, string> {
    const signer = createSign(version === '1' ? 'RSA-SHA1' : 'RSA-SHA256');
    for (const field of SIGNED_FIELDS[message.Type]) {
      if (field in message) signer.update(`${field}\n${message[field]}\n`);
    }
    return { ...message, SignatureVersion: version, Signature: signer.sign(this.key, 'base64') };
  }

  async close(): Promise<void> {
    this.agent.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** The SNS test server of a test file, started before its tests, healthy again after each, closed after them. */
export function useSnsTestServer(): () => SnsTestServer {
  let sns: SnsTestServer | undefined;
  beforeAll(async () => {
    sns = await SnsTestServer.start();
  });
  afterEach(() => {
    sns!.certificateHost.replies = [];
    sns!.certificateHost.delayMs = 0;
  });
  afterAll(async () => {
    await sns?.close();
  });
  return () => sns!;
}
