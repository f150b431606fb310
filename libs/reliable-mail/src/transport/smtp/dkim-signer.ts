import DKIM from 'nodemailer/lib/dkim';
import type { ResolvedDkimOptions } from './dkim-options.js';

/** What nodemailer's signer writes first when it signed; it passes the message on unsigned when its key fails. */
const SIGNATURE_FIELD = Buffer.from('DKIM-Signature:', 'latin1');

/** Signs messages with one key, by nodemailer's DKIM signer (as its Mailer does with the `dkim` option). */
export class DkimSigner {
  private readonly signer: DKIM;

  constructor(options: ResolvedDkimOptions) {
    this.signer = new DKIM(options);
  }

  /**
   * The message with a DKIM-Signature header field in front: the rest is the message's own bytes. Throws rather
   * than return the message unsigned.
   */
  async sign(message: Buffer): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const chunk of this.signer.sign(message)) chunks.push(chunk as Buffer);
    const signed = Buffer.concat(chunks);
    if (!signed.subarray(0, SIGNATURE_FIELD.length).equals(SIGNATURE_FIELD)) {
      throw new Error('DKIM signing failed: the signer gave no signature');
    }
    return signed;
  }
}
