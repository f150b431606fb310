import { describe, expect, it } from '@jest/globals';
import {
  IdempotencyConflictError,
  InvalidOptionsError,
  MailValidationError,
  OutboxFilterError,
  OutboxRowNotCancellableError,
  OutboxRowNotFoundError,
  type ReliableMailError,
  TransactionRequiredError,
} from '../errors.js';
import { httpStatusOf } from './reliable-mail-error.filter.js';

describe('httpStatusOf', () => {
  it.each<[string, ReliableMailError, number]>([
    ['a mail the caller got wrong', new MailValidationError('to', 'is not an address'), 400],
    ["an operator's filter", new OutboxFilterError('metadata', 'narrows nothing'), 400],
    ['an idempotency key reused with other content', new IdempotencyConflictError('order-1', 'row-1'), 409],
    ['a row already final', new OutboxRowNotCancellableError('row-1', 'sent'), 409],
    ['an unknown row', new OutboxRowNotFoundError('row-1'), 404],
    ['an enqueue outside a transaction: the server code is wrong', new TransactionRequiredError(), 500],
    ['a bad option', new InvalidOptionsError('from', 'is required'), 500],
  ])('%s: %i', (_, error, status) => {
    expect(httpStatusOf(error)).toBe(status);
  });
});
