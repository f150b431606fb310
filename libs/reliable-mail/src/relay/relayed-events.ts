import { Injectable } from '@nestjs/common';

/**
 * How old the names read from the destinations table may be: a destination first registered by another instance is
 * owed the events this one records from, at the latest, this long after.
 */
export const RELAYED_NAMES_MAX_AGE_MS = 10_000;

/**
 * What this process knows of the relay while it records events: which event names some registered destination takes
 * (those are recorded even where no listener hears them), and who to tell that one was just recorded. The names are
 * read from the destinations table at start (`MailEventRelay`) and again, in the background, by the first recording
 * after they are `RELAYED_NAMES_MAX_AGE_MS` old: no timer, so an instance that records nothing reads nothing.
 */
@Injectable()
export class RelayedEvents {
  private names: ReadonlySet<string> = new Set();
  private readAt = 0;
  private reader: (() => Promise<string[]>) | null = null;
  private reading = false;
  private readonly onRecorded = new Set<() => void>();

  /** Reads the names now, and keeps `read` for reading them again once they are old. */
  async readWith(read: () => Promise<string[]>): Promise<void> {
    this.reader = read;
    this.names = new Set(await read());
    this.readAt = Date.now();
  }

  /** Whether any destination was registered, as last read. */
  get anyRegistered(): boolean {
    this.readAgainIfOld();
    return this.names.size > 0;
  }

  /** Whether a registered destination takes events of this name, as last read. */
  has(name: string): boolean {
    this.readAgainIfOld();
    return this.names.has(name);
  }

  /** Calls `listener` whenever an event this process recorded for a destination has committed. */
  whenRecorded(listener: () => void): () => void {
    this.onRecorded.add(listener);
    return () => this.onRecorded.delete(listener);
  }

  /** An event of a relayed name committed here: this instance's destinations publish it now, not at their next poll. */
  recorded(): void {
    for (const listener of this.onRecorded) listener();
  }

  /** In the background; a read that fails (the database is down) keeps the names known, and is tried again later. */
  private readAgainIfOld(): void {
    if (!this.reader || this.reading || Date.now() - this.readAt <= RELAYED_NAMES_MAX_AGE_MS) return;
    this.reading = true;
    this.reader()
      .then((names) => {
        this.names = new Set(names);
      })
      .catch(() => undefined)
      .finally(() => {
        this.readAt = Date.now();
        this.reading = false;
      });
  }
}
