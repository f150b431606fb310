import { Injectable } from '@nestjs/common';
import { OutboxDatabase } from '../database/outbox-database.js';
import type { SqlClient } from '../database/sql-client.js';
import { restoreFileTemplate } from './file-templates.js';
import type { MailTemplate } from './mail-template.js';
import { MailTemplateRegistry } from './mail-template.registry.js';
import { findTemplateSources, saveTemplateSources } from './sql/template-sources.js';

/** Versions made again from the database kept at once: a deploy or two of changed templates, with room to spare. */
const KEPT_VERSIONS = 64;

/**
 * The versions of the templates from files, kept in the database: the start saves those it loaded, and a mail
 * enqueued with one this instance did not load (the files changed in a deploy since) is rendered with its sources
 * from there, made again with the same engine and options.
 */
@Injectable()
export class StoredTemplateVersions {
  /** Made again, by name and version, the most recently used last. */
  private readonly restored = new Map<string, Promise<MailTemplate | undefined>>();

  constructor(
    private readonly registry: MailTemplateRegistry,
    private readonly database: OutboxDatabase,
  ) {}

  /**
   * Saves the sources of every template read from files at this start. Run by the start before anything is
   * enqueued, so that every version a row names is kept before the row is written.
   */
  async save(db: SqlClient): Promise<void> {
    await saveTemplateSources(
      db,
      this.registry.fileTemplates().map(({ name, version, sources }) => ({ name, version, sources })),
    );
  }

  /**
   * The version of `name` kept in the database, made again; undefined when none is kept. Rejects with an
   * InvalidTemplateError when its sources no longer make a template, and with what the database throws.
   */
  find(name: string, version: string): Promise<MailTemplate | undefined> {
    const key = `${name}\n${version}`;
    let found = this.restored.get(key);
    if (found) {
      this.restored.delete(key);
    } else {
      // Kept as a promise, so that the mails of one batch that name the version read and make it once.
      found = this.restore(name, version);
      const forget = () => {
        if (this.restored.get(key) === found) this.restored.delete(key);
      };
      // A version not kept, or one that could not be read or made, is asked for again next time.
      found.then((template) => template ?? forget(), forget);
    }
    this.restored.set(key, found);
    if (this.restored.size > KEPT_VERSIONS) this.restored.delete(this.restored.keys().next().value!);
    return found;
  }

  private async restore(name: string, version: string): Promise<MailTemplate | undefined> {
    const stored = await findTemplateSources(this.database, name, version);
    if (stored === undefined) return undefined;
    const folder = this.registry.folderFor(name);
    return folder ? folder.restore(name, version, stored) : restoreFileTemplate(name, version, stored, {});
  }
}
