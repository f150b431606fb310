import { Migration20261201000000_CreateOrders } from './Migration20261201000000_create-orders.js';

/** The demo's own migrations, applied after `reliableMailMigrations`. */
export const demoMigrations = [
  { name: 'Migration20261201000000_demo_create-orders', class: Migration20261201000000_CreateOrders },
];
