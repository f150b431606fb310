import { Inject, Injectable } from '@nestjs/common';
import { OutboxDatabase } from '../database/outbox-database.js';
import { ReliableMailSetupError } from '../errors.js';
import type { ResolvedReliableMailOptions } from '../options/resolve-options.js';
import type { ResolvedUnsubscribe } from '../options/resolve-unsubscribe.js';
import { normalizeAddress } from '../outbox/validation/addresses.js';
import { RELIABLE_MAIL_OPTIONS } from '../reliable-mail.constants.js';
import { addUnsubscribe, removeUnsubscribe } from './sql/unsubscribes.js';
import { checkCategory } from './unsubscribe-category.js';
import { readUnsubscribeToken, type UnsubscribeRequest } from './unsubscribe-token.js';

/** What a one-click unsubscribe did. */
export interface UnsubscribeResult extends UnsubscribeRequest {
  /** False for a repeat of a link already used (or of another of the recipient's links in the category): no change. */
  added: boolean;
}

/**
 * One-click unsubscribes (RFC 8058) of the lanes marked `transactional: false`: `ReliableMailWebhooksModule`'s
 * route calls it with each link's token, and the app with `resubscribe` when a recipient opts in again.
 */
@Injectable()
export class MailUnsubscribeService {
  constructor(
    private readonly database: OutboxDatabase,
    @Inject(RELIABLE_MAIL_OPTIONS) private readonly options: Pick<ResolvedReliableMailOptions, 'unsubscribe'>,
  ) {}

  /** Whether the module has `unsubscribe`: without it no link is made, and none is taken. */
  get configured(): boolean {
    return this.options.unsubscribe !== null;
  }

  /** What a link's token unsubscribes, with nothing written; `UnsubscribeTokenError` for one this app did not make. */
  read(token: unknown): UnsubscribeRequest {
    return readUnsubscribeToken(this.settings().secrets, token);
  }

  /**
   * Unsubscribes a link's recipient from its category: no mail of a lane of that category goes to them any more
   * (transactional lanes still send). `UnsubscribeTokenError` for a token this app did not make, and nothing is
   * written; a repeat changes nothing.
   */
  async unsubscribe(token: unknown): Promise<UnsubscribeResult> {
    const request = this.read(token);
    return { ...request, added: await addUnsubscribe(this.database, request) };
  }

  /**
   * Takes back a recipient's unsubscribe from a category, for an app where they opted in again: mail of that
   * category goes to them again. Returns whether they were unsubscribed. `MailValidationError` for no address, or a
   * category no lane could have.
   */
  resubscribe(address: string, category: string): Promise<boolean> {
    return removeUnsubscribe(this.database, normalizeAddress('address', address), checkCategory('category', category));
  }

  private settings(): ResolvedUnsubscribe {
    if (!this.options.unsubscribe) {
      throw new ReliableMailSetupError(
        "one-click unsubscribe is not configured: give ReliableMailModule's unsubscribe option (url and secret)",
      );
    }
    return this.options.unsubscribe;
  }
}
