import type { AddressInfo } from 'node:net';
import type { INestApplication } from '@nestjs/common';
import { createDemoApp, type CreateDemoAppOptions } from '../../apps/demo/src/app.module.js';

/** The demo shop listening on a free loopback port, quiet, with the console's URL root. */
export async function listeningDemo(
  options: CreateDemoAppOptions,
  prepare: (app: INestApplication) => void = () => undefined,
): Promise<{ app: INestApplication; url: string }> {
  const app = await createDemoApp({ logger: false, ...options });
  prepare(app);
  await app.listen(0, '127.0.0.1');
  return { app, url: `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}` };
}

/** The same options for a second app on the same database that only serves: its dispatcher is off. */
export function serving(options: CreateDemoAppOptions): CreateDemoAppOptions {
  const mail = options.mail ?? {};
  return { ...options, mail: { ...mail, dispatcher: { ...mail.dispatcher, enabled: false } } };
}
