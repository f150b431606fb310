import { describe, expect, it } from '@jest/globals';
import { LanePriorities } from './lane-priorities.js';

const lanes = [
  { name: 'critical', priority: 2 },
  { name: 'default', priority: 1 },
  { name: 'news', priority: 1 },
  { name: 'bulk', priority: 0 },
];

describe('LanePriorities', () => {
  it.each([
    { busy: [], heldBack: [] },
    { busy: ['critical'], heldBack: ['default', 'news', 'bulk'] },
    { busy: ['default'], heldBack: ['bulk'] },
    { busy: ['default', 'news'], heldBack: ['bulk'] },
    { busy: ['bulk'], heldBack: [] },
    { busy: ['critical', 'bulk'], heldBack: ['default', 'news', 'bulk'] },
  ])('busy $busy holds back $heldBack, and never a lane of the same priority', ({ busy, heldBack }) => {
    const priorities = new LanePriorities(lanes);
    for (const lane of busy) priorities.setBusy(lane, true);
    expect(lanes.filter((lane) => priorities.holdsBack(lane.name)).map((lane) => lane.name)).toEqual(heldBack);
  });

  it('a lane resumes once the last busy lane above it goes quiet, and not before', () => {
    const priorities = new LanePriorities(lanes);
    const resumed: string[] = [];
    for (const lane of lanes) priorities.onResume(lane.name, () => resumed.push(lane.name));
    priorities.setBusy('critical', true);
    priorities.setBusy('default', true);
    priorities.setBusy('critical', false);
    // `default` (busy claiming, but held back from sending) and `news` have nothing above them any more; `bulk`
    // still waits for `default`.
    expect(resumed).toEqual(['default', 'news']);
    priorities.setBusy('default', false);
    expect(resumed).toEqual(['default', 'news', 'bulk']);
  });

  it('a lane that was not busy going quiet again resumes nothing', () => {
    const priorities = new LanePriorities(lanes);
    const resumed: string[] = [];
    priorities.onResume('bulk', () => resumed.push('bulk'));
    priorities.setBusy('critical', false);
    expect(resumed).toEqual([]);
  });
});
