/** What the priorities need of a lane: its name and its priority (a larger number goes first). */
export interface PrioritisedLane {
  name: string;
  priority: number;
}

/**
 * Which lanes of one instance hold back for others. While a lane is claiming or has a mail in hand, every lane of a
 * lower priority sends one mail at a time (its sends under way finish): on two cores, eight bulk sends beside a login
 * code took its median from 3.7 to 6.9 ms in `npm run bench` (critical lane under a 50,000-mail bulk backlog), the
 * wait being for the same CPU, event loop and PostgreSQL, not for a connection. One at a time rather than none, so
 * that a lane above that never goes quiet slows the lanes below without stopping them.
 */
export class LanePriorities {
  private readonly busy = new Set<string>();
  private readonly priorities: ReadonlyMap<string, number>;
  private readonly resumers = new Map<string, () => void>();

  constructor(lanes: readonly PrioritisedLane[]) {
    this.priorities = new Map(lanes.map((lane) => [lane.name, lane.priority]));
  }

  /** Whether a lane of a higher priority than this one is claiming or sending. */
  holdsBack(lane: string): boolean {
    const priority = this.priorities.get(lane)!;
    for (const name of this.busy) if (this.priorities.get(name)! > priority) return true;
    return false;
  }

  /** What a lane does once nothing holds it back any more: fill its slots again. */
  onResume(lane: string, resume: () => void): void {
    this.resumers.set(lane, resume);
  }

  /** Records whether a lane is claiming or sending; when it goes quiet, the lanes it held back resume. */
  setBusy(lane: string, busy: boolean): void {
    if (busy) {
      this.busy.add(lane);
      return;
    }
    if (!this.busy.delete(lane)) return;
    const priority = this.priorities.get(lane)!;
    for (const [name, resume] of this.resumers)
      if (this.priorities.get(name)! < priority && !this.holdsBack(name)) resume();
  }
}
