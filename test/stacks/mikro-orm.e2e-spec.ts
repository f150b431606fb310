import { EntityManager } from '@mikro-orm/postgresql';
import { describeStack, type StackSession } from '../support/stacks/stack-cases.js';

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
});
