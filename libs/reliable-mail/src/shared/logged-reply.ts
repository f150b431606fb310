import { ADDRESS_DELIMITERS, cutAtWord } from '../database/storable.js';

// A reply to a recipient often names it (`550 5.1.1 <ann@example.com>: Recipient address rejected`), and the log goes
// wherever the app ships it, kept longer and read more widely than the outbox's rows. What the log shows of a reply is
// what the send spans show, its code and enhanced status, and its text with every address taken out.

/** A server's reply as an attempt, a recipient or a refused session carries it. */
export interface ReplyFacts {
  replyCode: number | null;
  enhancedStatus: string | null;
  reply: string | null;
}

/**
 * A reply is kept cut to this many characters. An SMTP reply is a few lines of at most 512 octets each (RFC 5321
 * §4.5.3.1.5) and a provider's error a sentence; one of a megabyte (a gateway's HTML page, a server gone wrong) went
 * into the attempt's record once for each recipient, the failed event, the log and every broker's message.
 */
export const MAX_REPLY_LENGTH = 2_000;

/** A reply as an attempt keeps it: cut to `MAX_REPLY_LENGTH`, never inside an address. */
export const keptReply = (reply: string): string => cutAtWord(reply, MAX_REPLY_LENGTH);

/** What stands in the log for an address of a reply. */
export const ADDRESS_SHOWN_AS = '[address]';

/**
 * An address as it may stand in a reply: a local part and a domain around `@`, up to the brackets, quotes, spaces or
 * punctuation around it; a dot that ends the sentence stays. It starts where a token does (the lookbehind): tried
 * from every character of a server's long token, it took quadratic time (256,000 characters: 35 s).
 */
const WORD = `[^${ADDRESS_DELIMITERS}]`;
const ADDRESS = new RegExp(`(?<!${WORD})${WORD}+@${WORD}*[^${ADDRESS_DELIMITERS}.]`, 'g');

/** `text` with every address it names replaced by `shownAs`: by default as a log line may show it. */
export const withoutAddresses = (text: string, shownAs = ADDRESS_SHOWN_AS): string => text.replace(ADDRESS, shownAs);

/** `reply` as a log line may show it: its code and enhanced status, its text without the addresses it names. */
export function loggedReply({ replyCode, enhancedStatus, reply }: ReplyFacts): ReplyFacts {
  return { replyCode, enhancedStatus, reply: reply === null ? null : withoutAddresses(reply) };
}
