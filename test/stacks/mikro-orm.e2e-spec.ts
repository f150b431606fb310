import { expect, it, jest } from '@jest/globals';
import { EntityManager } from '@mikro-orm/postgresql';
import { WakeUpNotifier, type WakeUpPlan } from '../../libs/reliable-mail/src/outbox/wake-up.notifier.js';
import { describeStack, type StackSession, waitForMails } from '../support/stacks/stack-cases.js';

const EXPLICIT = 'em.transactional(), its EntityManager passed as tx';
const AMBIENT = 'em.transactional(), no tx given (found from the context)';

describeStack({
  stack: 'MikroORM',
  styles: [EXPLICIT, AMBIENT],
  outsideWays: ['no tx', 'the root EntityManager as tx'],
  mikroOrm: true,
  async open(app): Promise<StackSession> {
    const em = app.get(EntityManager);
    return {
      transaction: (style, work) =>
        em.transactional((fork) =>
          work({ target: style === EXPLICIT ? { tx: fork } : {}, execute: (sql) => fork.execute(sql) }),
        ),
      outside: (way, work) => work(way === 'no tx' ? {} : { tx: em }),
      close: async () => undefined,
    };
  },
  extraCases(fixture) {
    it('its EntityManager passed as tx, beside another open enqueue, wakes the dispatcher after its commit', async () => {
      const { app, outbox } = fixture();
      const em = app.get(EntityManager);
      const plans = jest.spyOn(app.get(WakeUpNotifier), 'plan');
      try {
        let commitFirst!: () => void;
        const first = em.transactional(async (fork) => {
          const result = await outbox.enqueue({ to: 'first@example.com', subject: 'Hi', text: 'x' }, { tx: fork });
          await new Promise<void>((resolve) => (commitFirst = resolve));
          return result;
        });
        while (plans.mock.calls.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
        const second = await em.transactional((fork) =>
          outbox.enqueue({ to: 'second@example.com', subject: 'Hi', text: 'x' }, { tx: fork }),
        );
        commitFirst();
        // The second was not the only open enqueue: its NOTIFY waited for its commit, which MikroORM reported.
        expect(plans.mock.results.map((result) => (result.value as WakeUpPlan).inStatement)).toEqual([true, false]);
        await waitForMails(fixture(), [await first, second]);
      } finally {
        plans.mockRestore();
      }
    });
  },
});
