import { describe, expect, it } from '@jest/globals';
import { InvalidOptionsError, MailValidationError } from '../errors.js';
import { InvalidTemplateError, type MailTemplate, paramsValidator, type StandardSchemaLike } from './mail-template.js';
import { MailTemplateRegistry } from './mail-template.registry.js';
import type { FileTemplate, MailTemplateFolder } from './file-templates.js';

const template = (name: string, version: number): MailTemplate => ({
  name,
  version,
  render: () => ({ subject: name, text: name }),
});

const fromFiles = (name: string, version: string): FileTemplate => ({
  name,
  version,
  sources: {
    format: 1,
    parts: { subject: name, text: name },
    layouts: {},
    partials: {},
    defaultLayout: 'main',
    inlineCss: false,
    strict: false,
  },
  render: () => ({ subject: name, text: name }),
});

/** A folder as the registry sees it, without files. */
const folder = (...templates: FileTemplate[]): MailTemplateFolder =>
  ({ dir: '/app/mail-templates', load: async () => templates, restore: async () => templates[0] }) as never;

const HASH_A = 'sha256:00000000000000aa';
const HASH_B = 'sha256:00000000000000bb';

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

  it("a folder's templates: the version loaded at this start is the latest, and the only one", async () => {
    const welcome = fromFiles('welcome', HASH_A);
    const first = folder(welcome);
    const second = folder(fromFiles('reset', HASH_B));
    const registry = await MailTemplateRegistry.load([template('code', 1), first, second]);
    expect(registry.latest('welcome')).toBe(welcome);
    expect(registry.get('welcome', HASH_A)).toBe(welcome);
    expect(registry.get('welcome', HASH_B)).toBeUndefined();
    expect(registry.versions('welcome')).toEqual([HASH_A]);
    expect(registry.names()).toEqual(['code', 'reset', 'welcome']);
    expect(registry.fileTemplates().map(({ name }) => name)).toEqual(['welcome', 'reset']);
    expect(registry.folderFor('reset')).toBe(second);
    // A name no folder holds now is made again with the first folder's helpers.
    expect(registry.folderFor('gone')).toBe(first);
    expect(new MailTemplateRegistry().folderFor('gone')).toBeUndefined();
  });

  it('refuses a hash as the version of a template registered by hand: its sources would not be saved', () => {
    const error = thrownBy(() => new MailTemplateRegistry().register(fromFiles('welcome', HASH_A)));
    expect(error).toBeInstanceOf(InvalidTemplateError);
    expect((error as Error).message).toMatch(
      /"welcome"@sha256:0+aa: .*come from fileTemplates\(\) in the templates option/,
    );
  });

  it.each<{ name: string; templates: Array<MailTemplate | MailTemplateFolder>; reason: RegExp }>([
    {
      name: 'numbered, then from files',
      templates: [template('welcome', 1), folder(fromFiles('welcome', HASH_A))],
      reason: /templates\[1\].*"welcome"@sha256:0+aa: is also registered as 1: a name is either versioned by hand/,
    },
    {
      name: 'from files, then numbered',
      templates: [folder(fromFiles('welcome', HASH_A)), template('welcome', 2)],
      reason: /templates\[1\].*"welcome"@2: is also registered as "sha256:0+aa"/,
    },
    {
      name: 'from two folders',
      templates: [folder(fromFiles('welcome', HASH_A)), folder(fromFiles('welcome', HASH_B))],
      reason: /templates\[1\].*"welcome"@sha256:0+bb: is also registered as "sha256:0+aa"/,
    },
  ])('refuses a name $name', async ({ templates, reason }) => {
    const error = await MailTemplateRegistry.load(templates).catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(InvalidOptionsError);
    expect((error as Error).message).toMatch(reason);
  });

  it('registers the templates option, naming the bad entry as an option', async () => {
    const registry = await MailTemplateRegistry.load([template('a', 1), template('a', 2)]);
    expect(registry.versions('a')).toEqual([1, 2]);
    const error = await MailTemplateRegistry.load([template('a', 1), template('a', 0)]).catch((thrown) => thrown);
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
