import { describe, expect, it, jest } from '@jest/globals';
import type { OutboxDatabase } from '../database/outbox-database.js';
import type { FileTemplate, FileTemplateSources, MailTemplateFolder } from './file-templates.js';
import { MailTemplateRegistry } from './mail-template.registry.js';
import { sourceHash } from './source-hash.js';
import { StoredTemplateVersions } from './stored-template-versions.js';

const context = { messageId: '<m1@test.example.com>', signal: new AbortController().signal };

const sourcesSaying = (subject: string): FileTemplateSources => ({
  format: 1,
  parts: { subject, text: 'body' },
  layouts: {},
  partials: {},
  defaultLayout: 'main',
  inlineCss: false,
  strict: false,
});

/** A database that keeps `kept` (by `name version`) and answers each read as `answer` says. */
function databaseKeeping(kept: Map<string, unknown>, answer: () => 'rows' | 'fails' = () => 'rows') {
  const query = jest.fn(async (_statement: unknown, values: readonly unknown[]) => {
    if (answer() === 'fails') throw new Error('connection terminated');
    const sources = kept.get(values.join(' '));
    return sources === undefined ? [] : [{ sources }];
  });
  return { query } as unknown as OutboxDatabase & { query: typeof query };
}

async function storeOver(database: OutboxDatabase, templates: FileTemplate[] = []): Promise<StoredTemplateVersions> {
  const folder = { load: async () => templates, restore: jest.fn() } as unknown as MailTemplateFolder;
  const registry = await MailTemplateRegistry.load(templates.length > 0 ? [folder] : []);
  return new StoredTemplateVersions(registry, database);
}

describe('StoredTemplateVersions', () => {
  it('makes a kept version again once: later mails, and mails of the same batch, use what it made', async () => {
    const sources = sourcesSaying('Old subject');
    const version = sourceHash(sources);
    const database = databaseKeeping(new Map([[`welcome ${version}`, sources]]));
    const store = await storeOver(database);
    const [first, second] = await Promise.all([store.find('welcome', version), store.find('welcome', version)]);
    const third = await store.find('welcome', version);
    expect(first).toBe(second);
    expect(third).toBe(first);
    expect(database.query).toHaveBeenCalledTimes(1);
    expect(await first!.render({}, context)).toMatchObject({ subject: 'Old subject', text: 'body' });
  });

  it('a version not kept, or a read that failed, is asked for again', async () => {
    let answer: 'rows' | 'fails' = 'rows';
    const database = databaseKeeping(new Map(), () => answer);
    const store = await storeOver(database);
    const version = sourceHash(sourcesSaying('x'));
    expect(await store.find('welcome', version)).toBeUndefined();
    answer = 'fails';
    await expect(store.find('welcome', version)).rejects.toThrow('connection terminated');
    answer = 'rows';
    expect(await store.find('welcome', version)).toBeUndefined();
    expect(database.query).toHaveBeenCalledTimes(3);
  });

  it('keeps the 64 versions used last', async () => {
    const kept = new Map<string, unknown>();
    const versions = Array.from({ length: 65 }, (_, index) => {
      const sources = sourcesSaying(`subject ${index}`);
      kept.set(`welcome ${sourceHash(sources)}`, sources);
      return sourceHash(sources);
    });
    const database = databaseKeeping(kept);
    const store = await storeOver(database);
    await store.find('welcome', versions[0]);
    for (const version of versions.slice(1, 64)) await store.find('welcome', version);
    // The first is used again, so the second is the one used longest ago when the 65th comes.
    await store.find('welcome', versions[0]);
    await store.find('welcome', versions[64]);
    expect(database.query).toHaveBeenCalledTimes(65);
    await store.find('welcome', versions[0]);
    expect(database.query).toHaveBeenCalledTimes(65);
    await store.find('welcome', versions[1]);
    expect(database.query).toHaveBeenCalledTimes(66);
  });

  it('saves the sources of the templates read from files in one statement, and nothing when there are none', async () => {
    const sources = sourcesSaying('Hi');
    const template = { name: 'welcome', version: sourceHash(sources), sources, render: () => ({ subject: 'Hi' }) };
    const db = { query: jest.fn(async (_statement: unknown, _values: unknown[]) => []) };
    await (await storeOver(databaseKeeping(new Map()), [template])).save(db);
    expect(db.query).toHaveBeenCalledTimes(1);
    expect(db.query.mock.calls[0][1]).toEqual([['welcome'], [template.version], [JSON.stringify(sources)]]);
    await (await storeOver(databaseKeeping(new Map()))).save(db);
    expect(db.query).toHaveBeenCalledTimes(1);
  });
});
