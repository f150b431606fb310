import type { ModuleRef } from '@nestjs/core';
import type { AppOrm } from '../mikro-orm/app-orm.js';
import { loadIfInstalled } from '../shared/optional-package.js';
import type { AmbientTransactions } from '../transactions/caller-transactions.js';

/** What the app runs on, as far as reliable-mail needs to know: its MikroORM and its TransactionHost, if any. */
export interface AppStack {
  readonly appOrm: AppOrm | null;
  readonly ambient: AmbientTransactions;
}

/**
 * Looks up the app's MikroORM and @nestjs-cls/transactional's TransactionHost, each only where its package is
 * installed and the app set it up: an app installs only its own stack.
 */
export async function findAppStack(moduleRef: ModuleRef): Promise<AppStack> {
  const mikroOrm = await loadIfInstalled('@mikro-orm/postgresql', () => import('../mikro-orm/app-orm.js'));
  const appOrm = mikroOrm?.AppOrm.find(moduleRef) ?? null;
  const cls = await loadIfInstalled('@nestjs-cls/transactional', () => import('@nestjs-cls/transactional'));
  let host: AmbientTransactions['host'] = null;
  try {
    host = cls
      ? moduleRef.get<unknown, NonNullable<AmbientTransactions['host']>>(cls.TransactionHost, { strict: false })
      : null;
  } catch {
    // Installed, but not set up in this app.
  }
  return { appOrm, ambient: { host, mikroOrm: appOrm?.em ?? null } };
}
