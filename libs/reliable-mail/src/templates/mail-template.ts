import { MailValidationError, ReliableMailError } from '../errors.js';
import { fieldPath } from '../shared/characters.js';

/** A template's version: an integer >= 1, or the hash of its sources for a template from files. */
export type TemplateVersion = number | string;

/** What a template renders: the subject and at least one of html and text. */
export interface RenderedContent {
  subject: string;
  html?: string;
  text?: string;
}

/** What a template is told about the message it renders. */
export interface MailRenderContext {
  /** The mail's `locale`, canonicalised (`de-AT`); undefined when the mail gave none. */
  locale?: string;
  /** The stored Message-ID, the same on every attempt. */
  messageId: string;
  /**
   * Aborts when the send's deadline (`dispatcher.sendTimeoutMs`) passes: a render that waits on something slow may
   * stop then. The attempt is over either way.
   */
  signal: AbortSignal;
}

/**
 * A named, versioned renderer. Register templates with the module's `templates` option or with
 * `MailTemplateRegistry.register`; `handlebarsTemplate()` makes one, and any other engine (React Email, MJML)
 * plugs in by implementing this interface.
 *
 * A row renders with the version that was the newest registered when it was enqueued, on every attempt: to change
 * what new mails look like, register a new version and keep the old one while rows that name it may still be sent.
 * Templates from files (`fileTemplates()`) are versioned by the hash of their sources instead, which the start saves
 * in the database, so that a row renders with the files it was enqueued with even after a deploy changed them.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- one registry holds templates of every parameter type
export interface MailTemplate<P = any> {
  readonly name: string;
  /**
   * An integer >= 1, set by hand: enqueue uses the highest registered version of the name. Or, for a template from
   * files, the hash of its sources (`sha256:` and 16 hex digits), which `fileTemplates()` computes.
   */
  readonly version: TemplateVersion;
  /**
   * Called at send time with the stored parameters. A throw (or a rejected promise) fails the row permanently,
   * reported with the error's message: rendering the same stored parameters again would fail the same way.
   */
  render(params: P, context: MailRenderContext): RenderedContent | Promise<RenderedContent>;
  /**
   * Called at enqueue with the parameters as they will be stored (plain JSON); throws to refuse them, and then
   * nothing is written. Must be synchronous. `paramsValidator(schema)` makes one from a schema.
   */
  validate?(params: P): void;
}

/** A template definition the registry cannot accept; raised by `MailTemplateRegistry.register`. */
export class InvalidTemplateError extends ReliableMailError {
  constructor(
    /** The template's name, or a description of it when it has none. */
    readonly template: string,
    readonly reason: string,
  ) {
    super(`Invalid mail template ${template}: ${reason}`);
  }
}

type PathSegment = PropertyKey | { readonly key: PropertyKey };

interface StandardIssue {
  readonly message: string;
  readonly path?: ReadonlyArray<PathSegment> | undefined;
}

type StandardResult =
  { readonly value: unknown; readonly issues?: undefined } | { readonly issues: ReadonlyArray<StandardIssue> };

/** The part of the Standard Schema interface (zod, valibot, arktype, effect schema) that reliable-mail uses. */
export interface StandardSchemaLike {
  readonly '~standard': {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => StandardResult | Promise<StandardResult>;
  };
}

/**
 * A schema for template parameters: a Standard Schema (zod, valibot, arktype…), an object with a `validate(params)`
 * method, or a function. A method or function refuses the parameters by throwing, by returning `false`, or by
 * returning `{ error }` (Joi's shape) or `{ issues: [...] }`; anything else accepts them. Validation is synchronous.
 */
export type ParamsSchema = StandardSchemaLike | { validate(params: unknown): unknown } | ((params: unknown) => unknown);

function pathToField(path: ReadonlyArray<PathSegment> | undefined): string {
  let field = 'params';
  for (const segment of path ?? []) {
    const key = typeof segment === 'object' && segment !== null ? segment.key : segment;
    if (typeof key === 'number') field += `[${key}]`;
    else field = fieldPath(field, String(key));
  }
  return field;
}

function isThenable(value: unknown): boolean {
  return (
    !!value &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

function asynchronous(): never {
  throw new MailValidationError(
    'params',
    'cannot be validated: the schema validates asynchronously, and enqueue validates synchronously',
  );
}

/** Turns what a validate method or function returned into a throw when it refuses the parameters. */
function checkOutcome(outcome: unknown, params: unknown): void {
  if (isThenable(outcome)) asynchronous();
  // A validator that returns the parameters it was given (a `parse`) accepted them, whatever keys they have.
  if (outcome === params) return;
  if (outcome === false) throw new MailValidationError('params', 'are invalid');
  if (outcome && typeof outcome === 'object') {
    const { error, issues } = outcome as { error?: unknown; issues?: unknown };
    // Joi's `{ value, error }`.
    if (error && 'value' in outcome)
      throw new MailValidationError(
        'params',
        `are invalid: ${error instanceof Error ? error.message : JSON.stringify(error)}`,
      );
    if (Array.isArray(issues) && issues.length > 0) throwIssue(issues as StandardIssue[]);
  }
}

function throwIssue(issues: ReadonlyArray<StandardIssue>): never {
  const [first] = issues;
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : '';
  throw new MailValidationError(pathToField(first.path), `is invalid: ${first.message}${more}`);
}

/**
 * A `MailTemplate.validate` from a schema. It throws a `MailValidationError` whose field is the path of the first
 * problem, such as `params.items[0].qty`.
 */
export function paramsValidator(schema: ParamsSchema): (params: unknown) => void {
  if (schema && (typeof schema === 'object' || typeof schema === 'function') && '~standard' in schema) {
    const standard = schema['~standard'];
    if (!standard || typeof standard.validate !== 'function')
      throw new TypeError('a Standard Schema needs ~standard.validate');
    return (params) => {
      const result = standard.validate(params);
      if (isThenable(result)) asynchronous();
      const { issues } = result as StandardResult;
      if (issues && issues.length > 0) throwIssue(issues);
    };
  }
  if (typeof schema === 'function') {
    return (params) => checkOutcome(schema(params), params);
  }
  if (schema && typeof schema === 'object' && typeof schema.validate === 'function') {
    return (params) => checkOutcome(schema.validate(params), params);
  }
  throw new TypeError('a params schema is a Standard Schema, an object with validate(params), or a function');
}
