/** What `npm start` prints once the shop listens: where things are, and requests to try. */
export function printUsage(baseUrl: string, database: string, mail: string): void {
  const post = (path: string, body: string) =>
    `curl -s -XPOST ${baseUrl}${path} -H 'content-type: application/json' -d '${body}'`;
  console.log(
    [
      '',
      `Demo shop is listening on ${baseUrl}`,
      `  database: ${database}`,
      `  mail:     ${mail}`,
      `  console:  ${baseUrl}/mail   (the mail console: every mail's life, and actions on it)`,
      '',
      'Try:',
      `  ${post('/orders', '{"email":"ann@example.com","items":[{"sku":"mug","qty":2,"price":12.5}]}')}`,
      `  curl -s ${baseUrl}/outbox/<mail.id from that answer>     # the outbox row: pending -> sent, with its attempts`,
      `  curl -s ${baseUrl}/orders/1`,
      `  ${post('/password-reset', '{"email":"ann@example.com"}')}`,
      `  curl -s ${baseUrl}/events                                # EmailSentEvent / EmailFailedEvent received`,
      `  curl -s ${baseUrl}/outbox                                # counts by status and lane, lag, recent rows`,
      `  curl -s ${baseUrl}/health                                # terminus: database, dispatcher, backlog, dead letters`,
      `  ${post('/orders', '{"email":"not-an-address","items":[{"sku":"mug","qty":1,"price":1}]}')}   # 400`,
      '',
      'Ctrl-C stops the app and what it started.',
      '',
    ].join('\n'),
  );
}
