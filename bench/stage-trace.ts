// BENCH_TRACE_IDLE=1: where a mail's time goes in reliable-mail's worker process, for the mails of one lane: the
// default lane's idle mails, and the critical lane's under the bulk backlog. The worker marks that lane's wake-ups,
// its claim statements' start and end (with their rows) and the SMTP send's start and end; a traced mail is a
// wake-up followed by a claim of one row and that row's send. The trace is cleared when the idle phase begins, and
// when the critical phase's first second of mails (those of an instance still opening its connections) is enqueued.
import { percentile } from './common.js';

type Mark = 'wake' | 'claim-start' | 'claim-end' | 'send-start' | 'send-end';

/** One stage's spread over the traced mails, ms. */
export interface StageFigure {
  p50: number | null;
  p90: number | null;
  p99: number | null;
}

export interface TracedStages {
  mails: number;
  wakeToClaim: StageFigure;
  claim: StageFigure;
  claimToSend: StageFigure;
  send: StageFigure;
}

export class StageTrace {
  private readonly marks: Array<{ mark: Mark; at: number; rows?: number }> = [];

  mark(mark: Mark, rows?: number): void {
    this.marks.push({ mark, at: performance.now(), rows });
  }

  /** Forgets what was traced so far: neither the drain's mails nor those of an instance still starting are idle. */
  clear(): void {
    this.marks.length = 0;
  }

  /**
   * The stages of every mail traced: a wake-up, then the next claim's start, that claim's end (one row), then the
   * next send's start and end, each looked for after the one before, so that a wake-up during a claim under way is
   * never paired with that earlier claim's end.
   */
  stages(): TracedStages {
    const spans: Record<Exclude<keyof TracedStages, 'mails'>, number[]> = {
      wakeToClaim: [],
      claim: [],
      claimToSend: [],
      send: [],
    };
    for (let index = 0; index < this.marks.length; index++) {
      if (this.marks[index].mark !== 'wake') continue;
      let cursor = index;
      const next = (wanted: Mark) => {
        for (let at = cursor + 1; at < this.marks.length && this.marks[at].mark !== 'wake'; at++)
          if (this.marks[at].mark === wanted) {
            cursor = at;
            return this.marks[at];
          }
        return undefined;
      };
      const claimStart = next('claim-start');
      const claimEnd = claimStart && next('claim-end');
      const sendStart = claimEnd && next('send-start');
      const sendEnd = sendStart && next('send-end');
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
