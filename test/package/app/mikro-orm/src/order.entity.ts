import { defineEntity, type InferEntity, p } from '@mikro-orm/core';

/** The app's own table beside reliable-mail's, written in the same transaction as the order's email. */
export const Order = defineEntity({
  name: 'Order',
  tableName: 'orders',
  properties: {
    id: p.integer().primary().autoincrement(),
    customerEmail: p.text(),
    total: p.decimal('number').precision(12).scale(2),
  },
});

export type Order = InferEntity<typeof Order>;
