import type { QuotaCounts } from '../options/reliable-mail-options.interface.js';

/**
 * What one claimed row's attempt costs the lane's quota, counted as the provider counts it: SES counts each
 * recipient ('recipients': a mail to 5 costs 5, to 120 in three requests of 50 costs 120); a provider that counts
 * requests counts the message once ('messages'), unless the lane sends each recipient a copy of their own (one-click
 * unsubscribe), which makes as many messages as recipients. `recipients` are those the attempt is for: a row closed
 * at its claim, or whose every recipient is done or suppressed, sends nothing and costs nothing.
 */
export function quotaChargeOf(recipients: number, counts: QuotaCounts, copyPerRecipient: boolean): number {
  if (recipients === 0) return 0;
  return counts === 'recipients' || copyPerRecipient ? recipients : 1;
}

/**
 * Which of a claim's rows its grant covers, given each row's charge (`quotaChargeOf`), in claim order: the first row
 * that costs anything always (a mail to more recipients than a grant holds still goes, as SES lets it through while
 * any of the second is left, and the next takes wait for it), then rows while their charges fit in `granted`; from the
 * first that does not, the rest go back to the queue, but for rows that cost nothing (closed at their claim), which
 * are kept. A grant of 4 over rows costing 3, 2, 1 keeps the first; over 5, 0, 1 the first two.
 */
export function keptWithinGrant(charges: readonly number[], granted: number): boolean[] {
  let used = 0;
  let full = false;
  return charges.map((charge) => {
    if (charge === 0) return true;
    if (!full && (used === 0 || used + charge <= granted)) {
      used += charge;
      return true;
    }
    full = true;
    return false;
  });
}
