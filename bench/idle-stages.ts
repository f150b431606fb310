// BENCH_TRACE_IDLE=1: where a mail's time goes in reliable-mail's worker process, for the mails of one lane: the
// default lane's idle mails, and the critical lane's under the bulk backlog. The worker marks that lane's wake-ups,
// its claim statements' start and end (with their rows), the delivery's start and the SMTP send's start and end; a
// traced mail is a wake-up followed by a claim of one row and its send. The idle phase's trace is cleared when the
// phase begins; the critical one's runs from the worker's start. Kept only while BENCH_TRACE_IDLE is set.
import { percentile } from './common.js';

type Mark = 'wake' | 'claim-start' | 'claim-end' | 'attempt' | 'send-start' | 'send-end';

/** One stage's spread over the idle mails, ms. */
export interface StageFigure {
  p50: number | null;
  p90: number | null;
  p99: number | null;
}

export interface IdleStages {
  mails: number;
  wakeToClaim: StageFigure;
  claim: StageFigure;
  claimToSend: StageFigure;
  send: StageFigure;
}

export class IdleStageTrace {
  private readonly marks: Array<{ mark: Mark; at: number; rows?: number }> = [];

  mark(mark: Mark, rows?: number): void {
    this.marks.push({ mark, at: performance.now(), rows });
  }

  /** Forgets what was traced so far: the drain's wake-ups are not idle mails. */
  clear(): void {
    this.marks.length = 0;
  }

  /** The stages of every idle mail traced: a wake-up whose first claim took one row, then that row's send. */
  stages(): IdleStages {
    const spans: Record<Exclude<keyof IdleStages, 'mails'>, number[]> = {
      wakeToClaim: [],
      claim: [],
      claimToSend: [],
      send: [],
    };
    for (let index = 0; index < this.marks.length; index++) {
      if (this.marks[index].mark !== 'wake') continue;
      const after = new Map<Mark, { at: number; rows?: number }>();
      for (let next = index + 1; next < this.marks.length && this.marks[next].mark !== 'wake'; next++) {
        const { mark, at, rows } = this.marks[next];
        if (!after.has(mark)) after.set(mark, { at, rows });
      }
      const [claimStart, claimEnd, sendStart, sendEnd] = (
        ['claim-start', 'claim-end', 'send-start', 'send-end'] as const
      ).map((mark) => after.get(mark));
      if (!claimStart || !claimEnd || claimEnd.rows !== 1 || !sendStart || !sendEnd) continue;
      spans.wakeToClaim.push(claimStart.at - this.marks[index].at);
      spans.claim.push(claimEnd.at - claimStart.at);
      spans.claimToSend.push(sendStart.at - claimEnd.at);
      spans.send.push(sendEnd.at - sendStart.at);
    }
    const figure = (values: number[]): StageFigure => ({
      p50: percentile(values, 50),
      p90: percentile(values, 90),
      p99: percentile(values, 99),
    });
    return {
      mails: spans.claim.length,
      wakeToClaim: figure(spans.wakeToClaim),
      claim: figure(spans.claim),
      claimToSend: figure(spans.claimToSend),
      send: figure(spans.send),
    };
  }
}
