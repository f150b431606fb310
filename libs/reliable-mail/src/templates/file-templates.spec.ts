import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { ReliableMailSetupError } from '../errors.js';
import { fileTemplates, type FileTemplatesOptions, restoreFileTemplate, SOURCES_FORMAT } from './file-templates.js';
import { InvalidTemplateError } from './mail-template.js';
import { SOURCE_HASH_PATTERN } from './source-hash.js';

const context = { messageId: '<m1@test.example.com>', signal: new AbortController().signal };
const folders: string[] = [];

/** A folder of template files in a temporary directory. */
async function folderOf(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'mail-templates-'));
  folders.push(dir);
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), content);
  }
  return dir;
}

async function load(files: Record<string, string>, options: Omit<FileTemplatesOptions, 'dir'> = {}) {
  const templates = await fileTemplates({ dir: await folderOf(files), ...options }).load();
  return new Map(templates.map((template) => [template.name, template]));
}

async function failure(promise: Promise<unknown>): Promise<Error> {
  const error = await promise.then(
    () => null,
    (thrown: unknown) => thrown,
  );
  if (!(error instanceof Error)) throw new Error('nothing was thrown');
  return error;
}

const shop: Record<string, string> = {
  'welcome.subject.hbs': 'Welcome, {{name}}',
  'welcome.html.hbs': '<p>Hello {{name}}</p>{{> footer}}',
  'welcome.de.subject.hbs': 'Willkommen, {{name}}',
  'orders/confirmation.subject.hbs': 'Order {{orderId}}',
  'orders/confirmation.html.hbs': '{{!< plain}}\n<ul>{{#each items}}{{> orders/line}}{{/each}}</ul>',
  'orders/confirmation.text.hbs': 'Order {{orderId}}: {{items.length}} items',
  'notes/raw.subject.hbs': 'Raw',
  'notes/raw.html.hbs': '{{!< none}}\n<p>raw</p>',
  'layouts/main.html.hbs': '<html><body>{{{body}}}</body></html>',
  'layouts/main.text.hbs': '{{{body}}}\n-- The Shop',
  'layouts/plain.html.hbs': '<div class="plain">{{{body}}}</div>',
  'partials/footer.hbs': '<footer>Bye {{name}}</footer>',
  'partials/orders/line.hbs': '<li>{{qty}} x {{sku}}</li>',
  'README.md': 'not a template',
  '.hidden/x.subject.hbs': 'not read',
};

afterAll(async () => {
  await Promise.all(folders.map((dir) => rm(dir, { recursive: true, force: true })));
});

describe('fileTemplates', () => {
  it('reads a folder: names from paths, parts and locales, layouts and partials', async () => {
    const templates = await load(shop);
    expect([...templates.keys()]).toEqual(['notes/raw', 'orders/confirmation', 'welcome']);
    for (const template of templates.values()) expect(template.version).toMatch(SOURCE_HASH_PATTERN);

    const welcome = templates.get('welcome')!;
    expect(await welcome.render({ name: 'Ann' }, context)).toEqual({
      subject: 'Welcome, Ann',
      html: '<html><body><p>Hello Ann</p><footer>Bye Ann</footer></body></html>',
      text: 'Hello Ann\n\nBye Ann',
    });
    expect((await welcome.render({ name: 'Ann' }, { ...context, locale: 'de-AT' })).subject).toBe('Willkommen, Ann');

    const confirmation = templates.get('orders/confirmation')!;
    expect(
      await confirmation.render({ orderId: 'A-7', items: [{ sku: 'MUG', qty: 2 }] }, { ...context, locale: 'de' }),
    ).toEqual({
      subject: 'Order A-7',
      html: '<div class="plain"><ul><li>2 x MUG</li></ul></div>',
      text: 'Order A-7: 1 items\n-- The Shop',
    });
    expect((await templates.get('notes/raw')!.render({}, context)).html).toBe('<p>raw</p>');
  });

  it('keeps in the sources what the version renders with: its parts, the layouts they use, every partial', async () => {
    const { sources } = (await load(shop)).get('orders/confirmation')!;
    expect(sources).toEqual({
      format: SOURCES_FORMAT,
      parts: {
        subject: shop['orders/confirmation.subject.hbs'],
        html: shop['orders/confirmation.html.hbs'],
        text: shop['orders/confirmation.text.hbs'],
      },
      layouts: { 'plain.html': shop['layouts/plain.html.hbs'], 'main.text': shop['layouts/main.text.hbs'] },
      partials: { footer: shop['partials/footer.hbs'], 'orders/line': shop['partials/orders/line.hbs'] },
      defaultLayout: 'main',
      inlineCss: false,
      strict: false,
    });
  });

  it.each<{
    name: string;
    change: Record<string, string>;
    options?: Omit<FileTemplatesOptions, 'dir'>;
    changes: boolean;
  }>([
    { name: 'the same files in another folder', change: {}, changes: false },
    {
      name: 'a character of its html',
      change: { 'welcome.html.hbs': '<p>Hello {{name}}!</p>{{> footer}}' },
      changes: true,
    },
    {
      name: 'a trailing newline of its subject',
      change: { 'welcome.subject.hbs': 'Welcome, {{name}}\n' },
      changes: true,
    },
    { name: 'a locale part', change: { 'welcome.de.subject.hbs': 'Hallo {{name}}' }, changes: true },
    { name: 'a new locale part', change: { 'welcome.fr.subject.hbs': 'Bienvenue {{name}}' }, changes: true },
    { name: 'a text part added', change: { 'welcome.text.hbs': 'Hello {{name}}' }, changes: true },
    { name: 'the partial it uses', change: { 'partials/footer.hbs': '<footer>Bye!</footer>' }, changes: true },
    { name: 'a partial it does not use', change: { 'partials/orders/line.hbs': '<li>{{sku}}</li>' }, changes: true },
    { name: 'a partial added', change: { 'partials/header.hbs': '<header></header>' }, changes: true },
    { name: 'its layout', change: { 'layouts/main.html.hbs': '<body>{{{body}}}</body>' }, changes: true },
    { name: 'a layout it does not use', change: { 'layouts/plain.html.hbs': '<div>{{{body}}}</div>' }, changes: false },
    { name: 'another template', change: { 'notes/raw.html.hbs': '<p>other</p>' }, changes: false },
    { name: 'inlineCss', change: {}, options: { inlineCss: true }, changes: true },
    { name: 'the default layout', change: {}, options: { defaultLayout: 'plain' }, changes: true },
    { name: 'strict', change: {}, options: { strict: true }, changes: true },
  ])('the version of welcome changes with $name: $changes', async ({ change, options, changes }) => {
    const before = (await load(shop)).get('welcome')!;
    const after = (await load({ ...shop, ...change }, options)).get('welcome')!;
    expect(after.version !== before.version).toBe(changes);
  });

  it('renders MJML: Handlebars first, into an MJML layout, then MJML to html; the text part from that html', async () => {
    const templates = await load({
      'receipt.subject.hbs': 'Receipt {{id}}',
      'receipt.mjml.hbs':
        '<mj-section><mj-column><mj-text>Receipt {{id}} for {{name}}</mj-text></mj-column></mj-section>',
      'layouts/main.mjml.hbs': '<mjml><mj-body>{{{body}}}</mj-body></mjml>',
      'layouts/main.html.hbs': '<p>an html layout, not for MJML</p>',
    });
    const rendered = await templates.get('receipt')!.render({ id: 7, name: '<b>Ann</b>' }, context);
    expect(rendered.html).toMatch(/^<!doctype html>/i);
    expect(rendered.html).toContain('Receipt 7 for &lt;b&gt;Ann&lt;/b&gt;');
    expect(rendered.html).not.toContain('<mj-');
    expect(rendered.html).not.toContain('not for MJML');
    expect(rendered.text).toBe('Receipt 7 for <b>Ann</b>');
  });

  it('inlines CSS with inlineCss', async () => {
    const templates = await load(
      {
        'note.subject.hbs': 'Note',
        'note.html.hbs': '<p class="lead">Hi {{name}}</p>',
        'layouts/main.html.hbs':
          '<html><head><style>.lead { color: red; }</style></head><body>{{{body}}}</body></html>',
      },
      { inlineCss: true },
    );
    const { html } = await templates.get('note')!.render({ name: 'Ann' }, context);
    expect(html).toContain('<p class="lead" style="color: red;">Hi Ann</p>');
    expect(html).not.toContain('<style>');
  });

  it('makes a version again from its stored sources, with the helpers given then', async () => {
    const helpers = { upper: (value: string) => value.toUpperCase() };
    const files = { 'hi.subject.hbs': 'Hi {{upper name}}', 'hi.html.hbs': '<p>{{> sig}}</p>', 'partials/sig.hbs': 'S' };
    const loaded = (await load(files, { helpers })).get('hi')!;
    const stored: unknown = JSON.parse(JSON.stringify(loaded.sources));
    const restored = await restoreFileTemplate('hi', loaded.version, stored, { helpers });
    expect(restored.version).toBe(loaded.version);
    expect(await restored.render({ name: 'ann' }, context)).toEqual(await loaded.render({ name: 'ann' }, context));
  });

  it('makes a version again as strict as it was loaded, whatever the folder says now', async () => {
    const loaded = (await load({ 'hi.subject.hbs': 'Hi {{name}}', 'hi.text.hbs': 'x' }, { strict: true })).get('hi')!;
    const restored = await restoreFileTemplate('hi', loaded.version, loaded.sources, {});
    await expect(Promise.resolve().then(() => restored.render({}, context))).rejects.toThrow(/"name" not defined/);
  });

  it('leaves sources of a later format to an instance of the release that saved them: not an InvalidTemplateError', async () => {
    const later = { ...validSources(), format: SOURCES_FORMAT + 1, shape: 'unknown here' };
    const error = await failure(restoreFileTemplate('hi', 'sha256:0000000000000000', later, {}));
    expect(error).not.toBeInstanceOf(InvalidTemplateError);
    expect(error.message).toBe(
      `template "hi"@sha256:0000000000000000 is kept in the format ${SOURCES_FORMAT + 1} of a later release, which ` +
        `this one (format ${SOURCES_FORMAT}) cannot read`,
    );
  });

  it.each<{ name: string; stored: unknown; reason: RegExp }>([
    { name: 'sources that are not an object', stored: 'x', reason: /not those of a file template/ },
    { name: 'sources without a format', stored: { ...validSources(), format: undefined }, reason: /not those/ },
    { name: 'sources without strict', stored: { ...validSources(), strict: undefined }, reason: /not those/ },
    { name: 'a part that is not a string', stored: { ...validSources(), parts: { subject: 1 } }, reason: /not those/ },
    {
      name: 'sources changed since (they no longer hash to the version)',
      stored: { ...validSources(), parts: { subject: 'changed', html: 'x' } },
      reason: /hash to sha256:[0-9a-f]{16}, not to its version/,
    },
  ])('refuses to make a version again from $name', async ({ stored, reason }) => {
    const { version } = (await load({ 'hi.subject.hbs': 'Hi', 'hi.html.hbs': 'x' })).get('hi')!;
    const error = await failure(restoreFileTemplate('hi', version, stored, {}));
    expect(error).toBeInstanceOf(InvalidTemplateError);
    expect(error.message).toMatch(reason);
  });

  it('a folder that does not exist stops the start, naming the absolute path, what it expected and the fix', async () => {
    const missing = join(await folderOf({}), 'dist', 'mail-templates');
    const error = await failure(fileTemplates({ dir: missing }).load());
    expect(error).toBeInstanceOf(ReliableMailSetupError);
    expect(error.message).toContain(`the folder ${missing} does not exist`);
    expect(error.message).toMatch(/welcome\.subject\.hbs with welcome\.html\.hbs/);
    expect(error.message).toContain(
      `add "assets": [{ "include": "mail-templates/**/*", "watchAssets": true }] to the compilerOptions of nest-cli.json`,
    );
  });

  it('a relative folder is resolved from the working directory, and named absolute', async () => {
    const error = await failure(fileTemplates({ dir: 'no-such-mail-templates' }).load());
    expect(error.message).toContain(`the folder ${join(process.cwd(), 'no-such-mail-templates')} does not exist`);
    expect(error.message).toContain(`resolved from the working directory (${process.cwd()})`);
  });

  it.each<{ name: string; files: Record<string, string>; reason: RegExp }>([
    { name: 'an empty folder', files: {}, reason: /holds no template; it should hold template files/ },
    {
      name: 'a folder of layouts and partials only',
      files: { 'layouts/main.html.hbs': '{{{body}}}', 'partials/a.hbs': 'a', 'notes.txt': '' },
      reason: /holds no template/,
    },
    { name: 'a misnamed part', files: { 'hi.htm.hbs': 'x' }, reason: /hi\.htm\.hbs is not a template file/ },
    { name: 'a locale that is none', files: { 'hi.x_y.subject.hbs': 'x' }, reason: /is not a template file/ },
    {
      name: 'a misnamed layout',
      files: { 'layouts/main.hbs': 'x' },
      reason: /is not named <layout>\.<html\|mjml\|text>/,
    },
    { name: 'no subject', files: { 'hi.html.hbs': 'x' }, reason: /"hi" \(.*hi\.\*\.hbs\): needs hi\.subject\.hbs/ },
    { name: 'no body', files: { 'hi.subject.hbs': 'x' }, reason: /needs html or text/ },
    {
      name: 'html and MJML',
      files: { 'hi.subject.hbs': 'x', 'hi.html.hbs': 'x', 'hi.de.mjml.hbs': 'x' },
      reason: /both html and mjml/,
    },
    {
      name: 'a layout that is not there',
      files: { 'hi.subject.hbs': 'x', 'hi.html.hbs': '{{!< fancy}}\nx' },
      reason: /names layout "fancy", which has no html part/,
    },
    {
      name: 'a source that does not parse',
      files: { 'hi.subject.hbs': 'x', 'hi.html.hbs': '{{#each items}}' },
      reason: /"hi" \(.*\): has a html that does not parse/,
    },
    {
      name: 'a partial that does not parse',
      files: { 'hi.subject.hbs': 'x', 'hi.html.hbs': 'x', 'partials/line.hbs': '{{#if x}}' },
      reason: /fileTemplates: \S*\/partials\/line\.hbs does not parse: /,
    },
    {
      name: 'a partial the folder does not have',
      files: { 'hi.subject.hbs': 'x', 'hi.html.hbs': '{{> header}}<p>x</p>', 'partials/footer.hbs': 'f' },
      reason:
        /fileTemplates: \S*\/hi\.html\.hbs renders the partial "header", which the folder does not have \(\S*\/partials\/header\.hbs\)$/,
    },
    {
      name: 'a partial that a partial renders, missing',
      files: { 'hi.subject.hbs': 'x', 'hi.html.hbs': '{{> footer}}', 'partials/footer.hbs': '{{> legal}}' },
      reason: /\/partials\/footer\.hbs renders the partial "legal"/,
    },
    {
      name: 'a partial that a layout renders, missing',
      files: { 'hi.subject.hbs': 'x', 'hi.html.hbs': 'x', 'layouts/main.html.hbs': '{{> header}}{{{body}}}' },
      reason: /\/layouts\/main\.html\.hbs renders the partial "header"/,
    },
    {
      name: 'a helper neither Handlebars nor the helpers option has',
      files: { 'hi.subject.hbs': 'Hi {{shout name}}', 'hi.html.hbs': '<p>{{money (round total)}}</p>' },
      reason:
        /hi\.html\.hbs calls the helper "money", which is neither one of Handlebars' nor in the helpers option; \S*hi\.html\.hbs calls the helper "round".*; \S*hi\.subject\.hbs calls the helper "shout"/,
    },
  ])('$name stops the start', async ({ files, reason }) => {
    const error = await failure(load(files));
    expect(error instanceof ReliableMailSetupError || error instanceof InvalidTemplateError).toBe(true);
    expect(error.message).toMatch(reason);
  });

  describe('symbolic links', () => {
    it('a link to a file or a folder inside the folder is read as what it links to', async () => {
      const dir = await folderOf({
        'hi.subject.hbs': 'Hi',
        'shared/hi.subject.hbs': 'Hi',
        'shared/hi.html.hbs': '<p>{{> current/sig}}</p>',
        'partials/2026/sig.hbs': 'S',
      });
      await symlink(join(dir, 'shared/hi.html.hbs'), join(dir, 'hi.html.hbs'));
      await symlink(join(dir, 'partials/2026'), join(dir, 'partials/current'));
      const templates = await fileTemplates({ dir }).load();
      expect(templates.map(({ name }) => name)).toEqual(['hi', 'shared/hi']);
      expect((await templates[0].render({}, context)).html).toBe('<p>S</p>');
      expect(Object.keys(templates[0].sources.partials).sort()).toEqual(['2026/sig', 'current/sig']);
    });

    it.each<{ name: string; link: string; target: (dir: string, outside: string) => string; reason: string }>([
      {
        name: 'a folder outside',
        link: 'partials',
        target: (_dir, outside) => outside,
        reason: 'not to a file or folder inside',
      },
      {
        name: 'a file outside',
        link: 'hi.html.hbs',
        target: (_dir, outside) => join(outside, 'footer.hbs'),
        reason: 'not to a file or folder inside',
      },
      {
        name: 'nothing',
        link: 'hi.html.hbs',
        target: (dir) => join(dir, 'gone.hbs'),
        reason: 'a symbolic link to nothing (its target does not exist)',
      },
      { name: 'the folder it is in', link: 't/loop', target: (dir) => dir, reason: 'a folder it is in' },
      { name: 'itself', link: 't/self', target: (dir) => join(dir, 't'), reason: 'a folder it is in' },
    ])('a link to $name stops the start, naming the link', async ({ link, target, reason }) => {
      const outside = await folderOf({ 'footer.hbs': 'F' });
      const dir = await folderOf({ 'hi.subject.hbs': 'Hi', 'hi.text.hbs': 'x', 't/x.txt': '' });
      await symlink(target(dir, outside), join(dir, link));
      const error = await failure(fileTemplates({ dir }).load());
      expect(error).toBeInstanceOf(ReliableMailSetupError);
      expect(error.message).toContain(`fileTemplates: ${join(dir, link)} is a symbolic link to `);
      expect(error.message).toContain(reason);
    });
  });
});

function validSources() {
  return {
    format: SOURCES_FORMAT,
    parts: { subject: 'Hi', html: 'x' },
    layouts: {},
    partials: {},
    defaultLayout: 'main',
    inlineCss: false,
    strict: false,
  };
}
