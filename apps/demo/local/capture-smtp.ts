import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join, relative } from 'node:path';
import { Logger } from '@nestjs/common';
import { SMTPServer } from 'smtp-server';
import { findFreePort } from './free-port.js';

export interface CaptureSmtpOptions {
  /** Each accepted message is written here as `<time>-<id>.eml`. */
  mailDir: string;
  /** Tried first; the next free port is used when it is taken. */
  preferredPort: number;
}

export interface CaptureSmtpServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

const logger = new Logger('CaptureSmtp');
const MAX_MESSAGE_BYTES = 25 * 1024 * 1024;

function fileNameFor(raw: Buffer): string {
  const messageId = /^Message-ID:\s*<([^>]+)>/im.exec(raw.subarray(0, 64 * 1024).toString('utf8'))?.[1];
  const id = (messageId ?? randomBytes(6).toString('hex')).replace(/[^A-Za-z0-9._-]+/g, '_').slice(0, 120);
  return `${new Date().toISOString().replace(/[:.]/g, '-')}-${id}.eml`;
}

/**
 * A local SMTP server that accepts every message and writes it to `mailDir` as an .eml file, so the demo can send
 * mail with nothing configured. No TLS, no authentication; it listens on 127.0.0.1 only.
 */
export async function startCaptureSmtp(options: CaptureSmtpOptions): Promise<CaptureSmtpServer> {
  await mkdir(options.mailDir, { recursive: true });
  const shownDir = relative(process.cwd(), options.mailDir) || options.mailDir;
  const server = new SMTPServer({
    name: 'demo-capture.localhost',
    banner: 'reliable-mail demo capture server',
    authOptional: true,
    // Without a certificate of its own, STARTTLS would offer smtp-server's self-signed one, which clients reject.
    disabledCommands: ['STARTTLS', 'AUTH'],
    size: MAX_MESSAGE_BYTES,
    logger: false,
    closeTimeout: 1_000,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('error', (error) => callback(error));
      stream.on('end', () => {
        if ((stream as unknown as { sizeExceeded?: boolean }).sizeExceeded) {
          callback(Object.assign(new Error('Message exceeds the fixed maximum message size'), { responseCode: 552 }));
          return;
        }
        const raw = Buffer.concat(chunks);
        const file = join(options.mailDir, fileNameFor(raw));
        writeFile(file, raw).then(
          () => {
            const recipients = session.envelope.rcptTo.map((rcpt) => rcpt.address).join(', ');
            logger.log(`Captured mail for ${recipients}: ${relative(process.cwd(), file)}`);
            callback(null, `Message captured as ${relative(options.mailDir, file)}`);
          },
          (error: unknown) => {
            logger.error(`Could not write ${file}: ${String(error)}`);
            callback(Object.assign(new Error('Local error writing the message'), { responseCode: 451 }));
          },
        );
      });
    },
  });
  // A client that disconnects mid-conversation raises ECONNRESET here; unhandled it would crash the process.
  server.on('error', (error) => logger.warn(`SMTP connection error: ${error.message}`));

  const port = await findFreePort(options.preferredPort);
  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.server.off('error', reject);
      resolve();
    });
  });
  const bound = (server.server.address() as AddressInfo).port;
  logger.log(`Capture SMTP server on 127.0.0.1:${bound}; messages are written to ${shownDir}/`);

  let closing: Promise<void> | null = null;
  return {
    url: `smtp://127.0.0.1:${bound}`,
    port: bound,
    close: () => (closing ??= new Promise<void>((resolve) => server.close(() => resolve()))),
  };
}
