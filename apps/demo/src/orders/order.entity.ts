import { defineEntity, type InferEntity, p } from '@mikro-orm/core';

export interface OrderItem {
  sku: string;
  qty: number;
  price: number;
}

/** The `orders` table (created by the demo's migration). */
export const Order = defineEntity({
  name: 'Order',
  tableName: 'orders',
  properties: {
    id: p.integer().primary().autoincrement(),
    customerEmail: p.text(),
    items: p.json<OrderItem[]>(),
    total: p.decimal('number').precision(12).scale(2),
    createdAt: p
      .datetime()
      .columnType('timestamptz')
      .onCreate(() => new Date()),
  },
});

export type Order = InferEntity<typeof Order>;
