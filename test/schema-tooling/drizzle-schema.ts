import { pgTable, text, uuid } from 'drizzle-orm/pg-core';

/** The app's own table, as its drizzle schema declares it: one column (`colour`) newer than the database's. */
export const drizzleWidget = pgTable('drizzle_widget', {
  id: uuid('id').primaryKey(),
  name: text('name').notNull(),
  colour: text('colour'),
});
