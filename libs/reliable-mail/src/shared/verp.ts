// Variable envelope return paths: every mail's SMTP envelope sender names its outbox row, so a DSN (a bounce
// email, sent to that address) says which row it is about even when it quotes nothing of the original message.

import { isUuid } from './uuid.js';

export interface Verp {
  /** The domain whose mailbox receives the DSNs. */
  domain: string;
  /** What comes before `+<row id>`. */
  localPart: string;
}

/** The envelope sender of one row's mail: `<localPart>+<row id>@<domain>`. */
export function verpAddress({ localPart, domain }: Verp, rowId: string): string {
  return `${localPart}+${rowId}@${domain}`;
}

/** The row id a VERP address names, or null when the address is not one of this module's. */
export function rowIdOfVerpAddress({ localPart, domain }: Verp, address: string): string | null {
  const at = address.lastIndexOf('@');
  if (at < 0 || address.slice(at + 1).toLowerCase() !== domain.toLowerCase()) return null;
  const prefix = `${localPart.toLowerCase()}+`;
  const local = address.slice(0, at).toLowerCase();
  if (!local.startsWith(prefix)) return null;
  const rowId = local.slice(prefix.length);
  return isUuid(rowId) ? rowId : null;
}
