import { describe, expect, it } from '@jest/globals';
import { InvalidOptionsError, MailValidationError } from '../errors.js';
import { InvalidTemplateError, type MailTemplate, paramsValidator, type StandardSchemaLike } from './mail-template.js';
import { MailTemplateRegistry } from './mail-template.registry.js';

const template = (name: string, version: number): MailTemplate => ({
  name,
  version,
  render: () => ({ subject: name, text: name }),
});

function thrownBy(action: () => unknown): unknown {
  try {
    action();
  } catch (error) {
    return error;
  }
  throw new Error('nothing was thrown');
}

describe('MailTemplateRegistry', () => {
  it('keeps several versions of a name; latest is the highest, whatever the order of registration', () => {
    const v1 = template('welcome', 1);
    const v2 = template('welcome', 2);
    const v10 = template('welcome', 10);
    const registry = new MailTemplateRegistry().register(v2).register(v10).register(v1).register(template('reset', 1));
    expect(registry.latest('welcome')).toBe(v10);
    expect(registry.get('welcome', 1)).toBe(v1);
    expect(registry.get('welcome', 3)).toBeUndefined();
    expect(registry.versions('welcome')).toEqual([1, 2, 10]);
    expect(registry.versions('nope')).toEqual([]);
    expect(registry.latest('nope')).toBeUndefined();
    expect(registry.names()).toEqual(['reset', 'welcome']);
  });

  it('registering the same object twice is harmless; another object under a taken version throws', () => {
    const v1 = template('welcome', 1);
    const registry = new MailTemplateRegistry().register(v1).register(v1);
    expect(registry.versions('welcome')).toEqual([1]);
    const error = thrownBy(() => registry.register(template('welcome', 1)));
    expect(error).toBeInstanceOf(InvalidTemplateError);
    expect((error as Error).message).toMatch(/"welcome"@1: is already registered; register a new version/);
  });

  it.each<{ name: string; template: unknown; reason: RegExp }>([
    { name: 'not an object', template: 'welcome', reason: /must be an object/ },
    { name: 'no name', template: { version: 1, render: () => undefined }, reason: /needs a name/ },
    {
      name: 'a name with spaces',
      template: { name: 'order confirmation', version: 1, render: () => undefined },
      reason: /needs a name/,
    },
    { name: 'version 0', template: { name: 'a', version: 0, render: () => undefined }, reason: /integer >= 1/ },
    {
      name: 'a fractional version',
      template: { name: 'a', version: 1.5, render: () => undefined },
      reason: /integer >= 1/,
    },
    {
      name: 'a string version',
      template: { name: 'a', version: '1', render: () => undefined },
      reason: /integer >= 1/,
    },
    { name: 'no render', template: { name: 'a', version: 1 }, reason: /needs a render/ },
    {
      name: 'a validate that is not a function',
      template: { name: 'a', version: 1, render: () => undefined, validate: {} },
      reason: /validate that is not a function/,
    },
  ])('refuses a template with $name', ({ template: given, reason }) => {
    const error = thrownBy(() => new MailTemplateRegistry().register(given as MailTemplate));
    expect(error).toBeInstanceOf(InvalidTemplateError);
    expect((error as Error).message).toMatch(reason);
  });

  it('registers the templates option, naming the bad entry as an option', () => {
    const registry = MailTemplateRegistry.of([template('a', 1), template('a', 2)]);
    expect(registry.versions('a')).toEqual([1, 2]);
    const error = thrownBy(() => MailTemplateRegistry.of([template('a', 1), template('a', 0)]));
    expect(error).toBeInstanceOf(InvalidOptionsError);
    expect(error).toMatchObject({ option: 'templates[1]' });
  });
});

describe('paramsValidator', () => {
  const failing = (field: string, reason: RegExp | string) => (action: () => unknown) => {
    const error = thrownBy(action);
    expect(error).toBeInstanceOf(MailValidationError);
    expect((error as MailValidationError).field).toBe(field);
    expect((error as MailValidationError).reason).toMatch(reason);
  };

  it('a Standard Schema: the path of the first issue is the field', () => {
    const schema: StandardSchemaLike = {
      '~standard': {
        version: 1,
        vendor: 'x',
        validate: (value) =>
          value === 'ok'
            ? { value }
            : { issues: [{ message: 'Too small', path: ['items', 2, { key: 'qty' }, 'weird key'] }] },
      },
    };
    const validate = paramsValidator(schema);
    expect(() => validate('ok')).not.toThrow();
    failing('params.items[2].qty["weird key"]', 'is invalid: Too small')(() => validate('no'));
  });

  it('a Standard Schema that validates asynchronously is refused with a clear reason', () => {
    const schema: StandardSchemaLike = {
      '~standard': { version: 1, vendor: 'x', validate: async (value) => ({ value }) },
    };
    failing('params', /validates asynchronously/)(() => paramsValidator(schema)({}));
  });

  it.each<{ name: string; outcome: (params: unknown) => unknown; reason: RegExp }>([
    {
      name: 'throws',
      outcome: () => {
        throw new Error('bad');
      },
      reason: /bad/,
    },
    { name: 'returns false', outcome: () => false, reason: /are invalid/ },
    {
      name: "returns Joi's { value, error }",
      outcome: (value) => ({ value, error: new Error('"total" is required') }),
      reason: /"total" is required/,
    },
    { name: 'returns { issues }', outcome: () => ({ issues: [{ message: 'nope', path: ['a'] }] }), reason: /nope/ },
    { name: 'returns a promise', outcome: async () => true, reason: /asynchronously/ },
  ])('a function or a validate method that $name refuses', ({ outcome, reason }) => {
    const throwing = (action: () => unknown) => {
      const error = thrownBy(action);
      expect(error instanceof MailValidationError || error instanceof Error).toBe(true);
      expect((error as Error).message).toMatch(reason);
    };
    throwing(() => paramsValidator(outcome)({ a: 1 }));
    throwing(() => paramsValidator({ validate: outcome })({ a: 1 }));
  });

  it.each<{ name: string; outcome: (params: unknown) => unknown }>([
    { name: 'returns nothing', outcome: () => undefined },
    { name: 'returns true', outcome: () => true },
    { name: 'returns the params themselves, even with an error key', outcome: (params) => params },
    { name: "returns Joi's { value } without error", outcome: (value) => ({ value, error: undefined }) },
  ])('a function that $name accepts', ({ outcome }) => {
    expect(() => paramsValidator(outcome)({ error: 'Payment declined' })).not.toThrow();
  });

  it('refuses something that is no schema', () => {
    expect(() => paramsValidator(42 as never)).toThrow(TypeError);
  });
});
