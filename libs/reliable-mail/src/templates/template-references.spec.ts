import { describe, expect, it } from '@jest/globals';
import { referencesOf, unresolvedReferences } from './template-references.js';

/** What is unresolved in `source` alone, with the partial `footer` and the helper `money` known, as `kind:name`. */
function unresolvedIn(source: string, helpers = ['money']): string[] {
  return unresolvedReferences(new Map([['t.hbs', referencesOf(source)]]), { partials: ['footer'], helpers }).map(
    ({ kind, name }) => `${kind}:${name}`,
  );
}

describe('unresolvedReferences', () => {
  it.each<{ name: string; source: string; unresolved: string[] }>([
    { name: 'a partial the folder has', source: '{{> footer}}', unresolved: [] },
    { name: 'a partial it does not have', source: '{{> header}}', unresolved: ['partial:header'] },
    { name: 'a partial in a folder', source: '{{> orders/line item}}', unresolved: ['partial:orders/line'] },
    { name: 'a partial named by a string', source: '{{> "header"}}', unresolved: ['partial:header'] },
    { name: 'a partial named by a number', source: '{{> 404}}', unresolved: ['partial:404'] },
    { name: 'a partial inside a block', source: '{{#each items}}{{> line}}{{/each}}', unresolved: ['partial:line'] },
    { name: 'a partial block, which falls back to its content', source: '{{#> header}}x{{/header}}', unresolved: [] },
    { name: "the caller's partial block", source: '{{> @partial-block}}', unresolved: [] },
    {
      name: 'a partial chosen by a helper when it renders',
      source: '{{> (money x)}}',
      unresolved: [],
    },
    { name: 'an inline partial', source: '{{#*inline "row"}}r{{/inline}}{{> row}}', unresolved: [] },
    { name: 'a value', source: '{{name}} {{{body}}} {{#items}}x{{/items}}', unresolved: [] },
    { name: 'a value of a path', source: '{{order.total}} {{this.x}} {{../name}} {{@locale}}', unresolved: [] },
    { name: 'a helper the option has', source: '{{money total currency="EUR"}}', unresolved: [] },
    { name: "Handlebars' own helpers", source: '{{#if a}}{{lookup b c}}{{else if d}}{{log e}}{{/if}}', unresolved: [] },
    { name: 'a helper with parameters', source: '{{shout name}}', unresolved: ['helper:shout'] },
    { name: 'a helper with a hash only', source: '{{shout level=2}}', unresolved: ['helper:shout'] },
    { name: 'a block helper with parameters', source: '{{#repeat 3}}x{{/repeat}}', unresolved: ['helper:repeat'] },
    { name: 'a subexpression', source: '{{money (round total)}}', unresolved: ['helper:round'] },
    { name: 'a subexpression in a partial call', source: '{{> footer x=(round y)}}', unresolved: ['helper:round'] },
    {
      name: 'a block parameter called with parameters',
      source: '{{#each fns as |fn|}}{{fn 1}}{{/each}}',
      unresolved: [],
    },
    { name: 'a path called with parameters', source: '{{this.fn 1}} {{@root.fn 1}}', unresolved: [] },
  ])('$name: $unresolved', ({ source, unresolved }) => {
    expect(unresolvedIn(source)).toEqual(unresolved);
  });

  it('a helperMissing helper answers for every helper, not for partials', () => {
    expect(unresolvedIn('{{shout name}} {{> header}}', ['helperMissing'])).toEqual(['partial:header']);
  });

  it('an inline partial or a block parameter declared in one source counts in the others, naming the one that uses it', () => {
    const sources = new Map([
      ['layout.hbs', referencesOf('{{#*inline "row"}}r{{/inline}}{{#each f as |fn|}}{{{body}}}{{/each}}')],
      ['part.hbs', referencesOf('{{> row}}{{fn 1}}{{> header}}')],
    ]);
    expect(unresolvedReferences(sources, { partials: [], helpers: [] })).toEqual([
      { source: 'part.hbs', kind: 'partial', name: 'header' },
    ]);
  });

  it('a source that does not parse throws', () => {
    expect(() => referencesOf('{{#each items}}')).toThrow(/Parse error|doesn't match/);
  });
});
