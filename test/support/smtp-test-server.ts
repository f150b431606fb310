import type { AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerSession } from 'smtp-server';

/**
 * What the server answers at one point of a conversation: a reply line (after `delayMs` when given; a 250 after
 * the final dot with its own text, such as a queue id), acceptance
 * after a delay or once a promise settles, a dropped connection, or silence.
 */
export type ScriptedReply =
  | { code: number; text: string; delayMs?: number }
  | { acceptAfterMs: number }
  | { acceptWhen: Promise<unknown> }
  | 'drop'
  | 'stall';

export interface SmtpScript {
  onConnect?: () => ScriptedReply | undefined;
  /** The reply to EHLO, and to the HELO a client falls back to when EHLO is refused. */
  onHelo?: () => ScriptedReply | undefined;
  onAuth?: () => ScriptedReply | undefined;
  onMailFrom?: (sender: string) => ScriptedReply | undefined;
  onRcptTo?: (recipient: string) => ScriptedReply | undefined;
  /** Called after the final dot; a message that is then dropped or accepted counts as received. */
  onData?: (message: ReceivedMessage) => ScriptedReply | undefined;
  /**
   * The most RCPT commands one transaction takes; the next ones get `452 4.5.3 Too many recipients`, as RFC 5321
   * §4.5.3.1.10 has a server answer past its limit.
   */
  maxRecipientsPerTransaction?: number;
}

export interface ReceivedMessage {
  messageId: string | null;
  receivedAt: number;
  /** The envelope sender (MAIL FROM). */
  sender: string;
  recipients: string[];
  /** The SMTP session (one TCP connection) that carried it. */
  sessionId: string;
  raw: string;
}

/** What the tests reach of smtp-server's connection object, which it does not expose. */
interface ServerConnection {
  id: string;
  _socket?: { destroy(): void };
  send(code: number, text: string): void;
  close(): void;
  handler_EHLO(command: string, done: () => void): void;
  handler_HELO(command: string, done: () => void): void;
}

function replyError({ code, text }: { code: number; text: string }): Error {
  return Object.assign(new Error(text), { responseCode: code });
}

/**
 * A real SMTP server (smtp-server) for tests, scripted per stage of the conversation. `received` holds every
 * message whose body the server got, including those it took and then dropped the connection on.
 */
export class SmtpTestServer {
  readonly received: ReceivedMessage[] = [];
  /** Every connection the server accepted, in order, by session id. */
  readonly sessions: string[] = [];
  script: SmtpScript = {};
  private readonly server: SMTPServer;

  constructor() {
    this.server = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      hideENHANCEDSTATUSCODES: true,
      logger: false,
      closeTimeout: 200,
      onConnect: (session, callback) => {
        this.sessions.push(session.id);
        this.scriptHelo(session);
        this.answer(session, this.script.onConnect?.(), callback);
      },
      onAuth: (auth, session, callback) => {
        const reply = this.script.onAuth?.();
        if (reply) return this.answer(session, reply, callback);
        callback(null, { user: auth.username });
      },
      onMailFrom: (address, session, callback) =>
        this.answer(session, this.script.onMailFrom?.(address.address), callback),
      onRcptTo: (address, session, callback) => {
        const limit = this.script.maxRecipientsPerTransaction;
        if (limit !== undefined && session.envelope.rcptTo.length >= limit) {
          return this.answer(session, { code: 452, text: '4.5.3 Too many recipients' }, callback);
        }
        this.answer(session, this.script.onRcptTo?.(address.address), callback);
      },
      onData: (stream, session, callback) => {
        const chunks: Buffer[] = [];
        stream.on('data', (chunk: Buffer) => chunks.push(chunk));
        stream.on('end', () => {
          const raw = Buffer.concat(chunks).toString('utf8');
          const message: ReceivedMessage = {
            messageId: /^Message-ID:\s*(\S+)/im.exec(raw)?.[1] ?? null,
            receivedAt: Date.now(),
            sender: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            recipients: session.envelope.rcptTo.map((rcpt) => rcpt.address),
            sessionId: session.id,
            raw,
          };
          const reply = this.script.onData?.(message);
          if (
            reply === undefined ||
            reply === 'drop' ||
            (typeof reply === 'object' && !('code' in reply && reply.code >= 300))
          ) {
            this.received.push(message);
          }
          this.answer(session, reply, callback);
        });
      },
    });
    // Clients killed mid-conversation raise ECONNRESET here; unhandled it would crash the test process.
    this.server.on('error', () => undefined);
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return (this.server.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `smtp://127.0.0.1:${(this.server.server.address() as AddressInfo).port}`;
  }

  /** How many copies of each Message-ID arrived. */
  copiesByMessageId(): Map<string, number> {
    const copies = new Map<string, number>();
    for (const message of this.received) {
      copies.set(message.messageId ?? '', (copies.get(message.messageId ?? '') ?? 0) + 1);
    }
    return copies;
  }

  /** How many copies of a message each recipient got. */
  copiesByRecipient(messageId: string): Map<string, number> {
    const copies = new Map<string, number>();
    for (const message of this.received.filter((received) => received.messageId === messageId)) {
      for (const recipient of message.recipients) copies.set(recipient, (copies.get(recipient) ?? 0) + 1);
    }
    return copies;
  }

  /**
   * Closes a session from the server's side, as an idle timeout does: with `reply` (such as 421) first, or without
   * a word.
   */
  closeSession(sessionId: string, reply?: { code: number; text: string }): void {
    const connection = this.connection(sessionId);
    if (!connection) return;
    if (!reply) return connection._socket?.destroy();
    connection.send(reply.code, reply.text);
    connection.close();
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private connection(sessionId: string): ServerConnection | undefined {
    const connections = (this.server as unknown as { connections: Set<ServerConnection> }).connections;
    return [...connections].find((connection) => connection.id === sessionId);
  }

  /** smtp-server has no hook for EHLO and HELO: the session's connection answers them by `onHelo` first. */
  private scriptHelo(session: SMTPServerSession): void {
    const connection = this.connection(session.id);
    if (!connection) return;
    for (const command of ['handler_EHLO', 'handler_HELO'] as const) {
      const handle = connection[command].bind(connection);
      connection[command] = (line, done) =>
        this.answer(session, this.script.onHelo?.(), (error) => {
          if (!error) return handle(line, done);
          connection.send((error as Error & { responseCode: number }).responseCode, error.message);
          done();
        });
    }
  }

  private answer(
    session: SMTPServerSession,
    reply: ScriptedReply | undefined,
    callback: (error?: Error | null) => void,
  ): void {
    if (reply === undefined) return callback();
    if (reply === 'stall') return;
    if (reply === 'drop') return this.closeSession(session.id);
    if ('acceptAfterMs' in reply) {
      setTimeout(() => callback(), reply.acceptAfterMs);
      return;
    }
    if ('acceptWhen' in reply) {
      void reply.acceptWhen.then(() => callback());
      return;
    }
    // smtp-server takes a second argument as the text of a 250 (after the final dot: `250 <text>`).
    if (reply.code < 300) return (callback as (error: null, text: string) => void)(null, reply.text);
    if (reply.delayMs) {
      setTimeout(() => callback(replyError(reply)), reply.delayMs);
      return;
    }
    callback(replyError(reply));
  }
}
