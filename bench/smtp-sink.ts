// The SMTP sink of the benchmark, in a process of its own (forked by bench/run.ts). It accepts every message
// (no auth, no STARTTLS), records when it accepted each Message-ID, and answers the runner over IPC:
//   stats { withTimestamps?, ids? } -> { received, unique, duplicates, ..., perMessageId? }
//   reset                           -> forgets everything received so far
//   stop                            -> closes the server and exits
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { now, push, serveIpc } from './common.js';

const HEADER_LIMIT = 16_384;

let received = 0;
let duplicates = 0;
let withoutMessageId = 0;
let errors = 0;
let lastError: string | null = null;
let firstAt: number | null = null;
let lastAt: number | null = null;
/** Message-ID -> when it was first accepted. */
let acceptedAt = new Map<string, number>();
/** Message-ID -> how many times it was accepted, for ids seen more than once. */
let seenAgain = new Map<string, number>();

function messageIdOf(header: string): string | null {
  return /^Message-ID:[ \t]*(\S+)/im.exec(header)?.[1] ?? null;
}

const server = new SMTPServer({
  authOptional: true,
  disabledCommands: ['AUTH', 'STARTTLS'],
  hideENHANCEDSTATUSCODES: true,
  logger: false,
  closeTimeout: 1_000,
  onData(stream, _session, callback) {
    let header = '';
    let headerDone = false;
    stream.on('data', (chunk: Buffer) => {
      if (headerDone) return;
      header += chunk.toString('latin1');
      const end = header.indexOf('\r\n\r\n');
      if (end >= 0) {
        header = header.slice(0, end);
        headerDone = true;
      } else if (header.length > HEADER_LIMIT) {
        headerDone = true;
      }
    });
    stream.on('error', (error: Error) => {
      errors++;
      lastError = String(error);
    });
    stream.on('end', () => {
      const id = messageIdOf(header);
      const at = now();
      received++;
      firstAt ??= at;
      lastAt = at;
      if (id === null) {
        withoutMessageId++;
      } else if (acceptedAt.has(id)) {
        duplicates++;
        seenAgain.set(id, (seenAgain.get(id) ?? 1) + 1);
      } else {
        acceptedAt.set(id, at);
      }
      callback(null, 'OK: queued');
    });
  },
});
// A client that dies mid-conversation raises ECONNRESET here; without a handler the sink would crash.
server.on('error', (error: Error) => {
  errors++;
  lastError = String(error);
});

serveIpc({
  stats(request) {
    const ids = request.ids as string[] | undefined;
    let perMessageId: Record<string, number> | undefined;
    if (request.withTimestamps) perMessageId = Object.fromEntries(acceptedAt);
    else if (ids)
      perMessageId = Object.fromEntries(ids.filter((id) => acceptedAt.has(id)).map((id) => [id, acceptedAt.get(id)!]));
    return {
      received,
      unique: acceptedAt.size,
      duplicates,
      duplicatedIds: [...seenAgain.entries()].slice(0, 20),
      withoutMessageId,
      errors,
      lastError,
      firstAt,
      lastAt,
      perMessageId,
    };
  },
  reset() {
    received = duplicates = withoutMessageId = errors = 0;
    lastError = null;
    firstAt = lastAt = null;
    acceptedAt = new Map();
    seenAgain = new Map();
    return true;
  },
  async stop() {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    setImmediate(() => process.exit(0));
    return true;
  },
});

server.listen(0, '127.0.0.1', () => {
  push({ type: 'listening', port: (server.server.address() as AddressInfo).port });
});
