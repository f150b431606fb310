import Handlebars from 'handlebars';

/**
 * What one Handlebars source names that must exist when it renders, as far as that is certain without rendering it,
 * and the names it declares that may stand for them.
 */
export interface SourceReferences {
  /** Partials it renders by a fixed name: `{{> footer}}`, not `{{#> footer}}…{{/footer}}`, which falls back. */
  partials: Set<string>;
  /** Helpers it calls: a subexpression, or a mustache or block with parameters, whose name has no other meaning. */
  helpers: Set<string>;
  /** Partials it declares with `{{#*inline "name"}}`. */
  inlinePartials: Set<string>;
  /** Names of block parameters (`as |item|`), which a call with parameters may name instead of a helper. */
  blockParams: Set<string>;
}

export interface UnresolvedReference {
  /** The source that names it, as the caller keyed it. */
  source: string;
  kind: 'partial' | 'helper';
  name: string;
}

/** The helpers every Handlebars environment has (if, each, lookup, helperMissing, …). */
const BUILT_IN_HELPERS: ReadonlySet<string> = new Set(Object.keys(Handlebars.create().helpers));

/** Calls `visit` on every node of the tree, depth first. */
function walk(value: unknown, visit: (node: hbs.AST.Node) => void): void {
  if (Array.isArray(value)) {
    for (const item of value) walk(item, visit);
    return;
  }
  if (!value || typeof value !== 'object') return;
  if (typeof (value as hbs.AST.Node).type === 'string') visit(value as hbs.AST.Node);
  for (const [key, child] of Object.entries(value)) if (key !== 'loc') walk(child, visit);
}

/**
 * The name of a path that can only be a helper or a value of the context: one segment, not `@data`, `../x`, `./x`
 * or `this.x` (those are looked up in the context or the data, never among the helpers).
 */
function plainName(path: hbs.AST.Expression): string | null {
  if (path.type !== 'PathExpression') return null;
  const { data, depth, parts, original } = path as hbs.AST.PathExpression;
  return !data && depth === 0 && parts.length === 1 && original === parts[0] ? original : null;
}

/**
 * What `source` names (see `SourceReferences`). Throws what `Handlebars.parse` throws for a source that does not
 * parse. A call with parameters names a helper unless its name is a block parameter: the parameters of a mail are
 * JSON, which holds no function a call could find in the context instead.
 */
export function referencesOf(source: string): SourceReferences {
  const references: SourceReferences = {
    partials: new Set(),
    helpers: new Set(),
    inlinePartials: new Set(),
    blockParams: new Set(),
  };
  walk(Handlebars.parse(source), (node) => {
    switch (node.type) {
      case 'PartialStatement': {
        // Typed as a path or a subexpression, it is a literal too in `{{> "name"}}` and `{{> 404}}`.
        const name = (node as hbs.AST.PartialStatement).name as
          hbs.AST.PathExpression | hbs.AST.SubExpression | hbs.AST.StringLiteral;
        // A subexpression chooses the partial when it renders; `@partial-block` is the caller's block.
        if (name.type !== 'SubExpression' && !('data' in name && name.data))
          references.partials.add(String(name.original));
        break;
      }
      case 'DecoratorBlock': {
        const { path, params } = node as hbs.AST.DecoratorBlock;
        const [declared] = params;
        if (plainName(path) === 'inline' && declared?.type === 'StringLiteral')
          references.inlinePartials.add((declared as hbs.AST.StringLiteral).value);
        break;
      }
      case 'Program':
        for (const name of (node as hbs.AST.Program).blockParams ?? []) references.blockParams.add(name);
        break;
      case 'SubExpression':
      case 'MustacheStatement':
      case 'BlockStatement': {
        const { path, params, hash } = node as hbs.AST.MustacheStatement;
        const name = plainName(path);
        // Without parameters, `{{name}}` and `{{#name}}` may be values of the context: only a call is certain.
        if (name !== null && (node.type === 'SubExpression' || params.length > 0 || hash)) references.helpers.add(name);
        break;
      }
    }
  });
  return references;
}

/**
 * The partials and helpers that the sources name and that neither `known` nor the sources themselves (an inline
 * partial, a block parameter of any of them) provide, with the source naming each. A `helperMissing` helper answers
 * for any name, so none is unresolved then.
 */
export function unresolvedReferences(
  sources: ReadonlyMap<string, SourceReferences>,
  known: { partials: Iterable<string>; helpers: Iterable<string> },
): UnresolvedReference[] {
  const partials = new Set(known.partials);
  const given = new Set(known.helpers);
  const helpers = new Set([...BUILT_IN_HELPERS, ...given]);
  // Declared in one source, used in another it renders: a name declared anywhere is given the benefit of the doubt.
  for (const references of sources.values()) {
    for (const name of references.inlinePartials) partials.add(name);
    for (const name of references.blockParams) helpers.add(name);
  }
  const anyHelper = given.has('helperMissing');
  const unresolved: UnresolvedReference[] = [];
  for (const [source, references] of sources) {
    for (const name of references.partials) if (!partials.has(name)) unresolved.push({ source, kind: 'partial', name });
    if (anyHelper) continue;
    for (const name of references.helpers) if (!helpers.has(name)) unresolved.push({ source, kind: 'helper', name });
  }
  return unresolved;
}
