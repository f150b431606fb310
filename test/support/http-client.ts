import type { INestApplication } from '@nestjs/common';

/** Starts the app on a free port of the loopback interface; resolves to its base URL. */
export async function listenLocally(app: INestApplication): Promise<string> {
  await app.listen(0, '127.0.0.1');
  return (await app.getUrl()).replace('[::1]', '127.0.0.1');
}

/** POSTs a JSON body, as a browser's fetch or curl would. */
export function postJson(base: string, path: string, body: unknown): Promise<Response> {
  return fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}
