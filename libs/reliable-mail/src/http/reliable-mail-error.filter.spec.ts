import { describe, expect, it } from '@jest/globals';
import type { ArgumentsHost } from '@nestjs/common';
import type { HttpAdapterHost } from '@nestjs/core';
import { isObservable, lastValueFrom, type Observable } from 'rxjs';
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
import { httpStatusOf, ReliableMailErrorFilter } from './reliable-mail-error.filter.js';

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

describe('ReliableMailErrorFilter outside HTTP', () => {
  const error = new MailValidationError('to', 'is not an address');
  const host = (type: string) => ({ getType: () => type }) as unknown as ArgumentsHost;
  const filter = new ReliableMailErrorFilter({} as HttpAdapterHost);

  it('gives an RPC handler an erroring Observable, as Nest’s RPC filters do', async () => {
    const answer = filter.catch(error, host('rpc'));
    expect(isObservable(answer)).toBe(true);
    await expect(lastValueFrom(answer as Observable<never>)).rejects.toBe(error);
  });

  it('gives a GraphQL resolver the error itself', () => {
    expect(filter.catch(error, host('graphql'))).toBe(error);
  });
});
