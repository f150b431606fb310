import { Readable } from 'node:stream';
import { describe, expect, it, jest } from '@jest/globals';
import type { MailPayloadV1, MailPayloadV2 } from '../outbox/mail.types.js';
import type { AttachmentResolver } from '../options/reliable-mail-options.interface.js';
import { handlebarsTemplate } from '../templates/handlebars-template.js';
import { MailRenderDeferral, MailRenderError, MailRenderer } from './mail-renderer.js';
import type { MailTemplate } from '../templates/mail-template.js';
import { MailTemplateRegistry } from '../templates/mail-template.registry.js';
import { InvalidTemplateError } from '../templates/mail-template.js';
import type { StoredTemplateVersions } from '../templates/stored-template-versions.js';

const signal = new AbortController().signal;
const messageId = '<m1@test.example.com>';
const envelope = {
  from: { address: 'shop@example.com' },
  to: [{ address: 'ann@example.com' }],
  cc: [],
  bcc: [],
  replyTo: [],
  headers: { 'X-Order': '7' },
};
const rendered = { ...envelope, attachments: [] };

const receipt = handlebarsTemplate({
  name: 'receipt',
  version: 1,
  subject: 'Receipt {{id}}',
  html: '<p>Receipt {{id}}</p>',
});
const receiptV2 = handlebarsTemplate({
  name: 'receipt',
  version: 2,
  subject: 'Your receipt {{id}}',
  html: '<p>Your receipt {{id}}</p>',
});

function templated(
  name: string,
  version: number | string,
  params: Record<string, never> | Record<string, string | number> = { id: 7 },
  extra: Partial<MailPayloadV2> = {},
): MailPayloadV2 {
  return { v: 2, ...envelope, template: { name, version, params }, ...extra };
}

function renderer(
  templates: MailTemplate[],
  attachmentResolver: AttachmentResolver | null = null,
  storedVersions: StoredTemplateVersions | null = null,
): MailRenderer {
  const registry = new MailTemplateRegistry();
  for (const template of templates) registry.register(template);
  return new MailRenderer(registry, { attachmentResolver }, storedVersions);
}

async function renderError(promise: Promise<unknown>): Promise<MailRenderError> {
  const error = await promise.then(
    () => null,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(MailRenderError);
  return error as MailRenderError;
}

describe('MailRenderer', () => {
  it('sends a v1 payload as it was stored', async () => {
    const payload: MailPayloadV1 = { v: 1, ...envelope, subject: 'Hi', text: 'Hello', html: '<p>Hello</p>' };
    expect(await renderer([]).render(messageId, payload, signal)).toEqual({
      ...rendered,
      subject: 'Hi',
      text: 'Hello',
      html: '<p>Hello</p>',
    });
  });

  it('sends a v2 payload with a body as it was stored', async () => {
    const payload: MailPayloadV2 = { v: 2, ...envelope, subject: 'Hi', text: 'Hello' };
    expect(await renderer([]).render(messageId, payload, signal)).toStrictEqual({
      ...rendered,
      subject: 'Hi',
      text: 'Hello',
    });
  });

  it('renders with the version the row was enqueued with, not the newest', async () => {
    const mail = await renderer([receipt, receiptV2]).render(messageId, templated('receipt', 1), signal);
    expect(mail).toMatchObject({ subject: 'Receipt 7', html: '<p>Receipt 7</p>', text: 'Receipt 7' });
  });

  it("a subject on the mail overrides the template's", async () => {
    const mail = await renderer([receipt]).render(
      messageId,
      templated('receipt', 1, { id: 7 }, { subject: 'Thanks!' }),
      signal,
    );
    expect(mail).toMatchObject({ subject: 'Thanks!', html: '<p>Receipt 7</p>' });
  });

  it('hands the template the locale and the Message-ID, and a copy of the params', async () => {
    const render = jest.fn((params: Record<string, unknown>, _context: unknown) => {
      params.mutated = true;
      return { subject: 's', text: 't' };
    });
    const payload = templated('spy', 1, { id: 7 }, {});
    payload.template!.locale = 'de-AT';
    await renderer([{ name: 'spy', version: 1, render }]).render(messageId, payload, signal);
    expect(render).toHaveBeenCalledWith({ id: 7, mutated: true }, { locale: 'de-AT', messageId, signal });
    expect(payload.template!.params).toEqual({ id: 7 });
  });

  it.each<{ name: string; templates: MailTemplate[]; payload: MailPayloadV2; reason: string | RegExp }>([
    {
      name: 'a version that is no longer registered',
      templates: [receiptV2],
      payload: templated('receipt', 1),
      reason:
        'template "receipt"@1 is not registered (registered versions: 2); a row renders only with the version it was enqueued with',
    },
    {
      name: 'a template that is not registered at all',
      templates: [],
      payload: templated('receipt', 1),
      reason: /template "receipt"@1 is not registered \(no version of it is\)/,
    },
    {
      name: 'a template that throws',
      templates: [
        {
          name: 'boom',
          version: 3,
          render: () => {
            throw new Error('items is not iterable');
          },
        },
      ],
      payload: templated('boom', 3),
      reason: 'template "boom"@3 failed to render: items is not iterable',
    },
    {
      name: 'a template whose promise rejects',
      templates: [
        {
          name: 'boom',
          version: 1,
          render: async () => {
            throw new TypeError('no react');
          },
        },
      ],
      payload: templated('boom', 1),
      reason: 'template "boom"@1 failed to render: no react',
    },
    {
      name: 'a template that renders nothing',
      templates: [{ name: 'x', version: 1, render: () => null as never }],
      payload: templated('x', 1),
      reason: /render returned null/,
    },
    {
      name: 'a template that renders no subject',
      templates: [{ name: 'x', version: 1, render: () => ({ subject: ' ', html: 'x' }) }],
      payload: templated('x', 1),
      reason: /rendered no subject/,
    },
    {
      name: 'a template that renders no body',
      templates: [{ name: 'x', version: 1, render: () => ({ subject: 's', html: '' }) }],
      payload: templated('x', 1),
      reason: /rendered neither html nor text/,
    },
    {
      name: 'a template that renders a non-string part',
      templates: [{ name: 'x', version: 1, render: () => ({ subject: 's', html: 42 as never }) }],
      payload: templated('x', 1),
      reason: /html part that is not a string/,
    },
  ])('fails for $name', async ({ templates, payload, reason }) => {
    const error = await renderError(renderer(templates).render(messageId, payload, signal));
    if (typeof reason === 'string') expect(error.message).toBe(reason);
    else expect(error.message).toMatch(reason);
  });

  it('folds a line break in a rendered subject', async () => {
    const template: MailTemplate = {
      name: 'x',
      version: 1,
      render: () => ({ subject: 'Hi\r\nBcc: evil@example.com', text: 't' }),
    };
    expect((await renderer([template]).render(messageId, templated('x', 1), signal)).subject).toBe(
      'Hi Bcc: evil@example.com',
    );
  });

  describe('a version hashed from files that this instance did not load (a deploy changed the files)', () => {
    const HASH = 'sha256:0123456789abcdef';
    const stored = (find: (name: string, version: string) => Promise<MailTemplate | undefined>) =>
      ({ find: jest.fn(find) }) as unknown as StoredTemplateVersions & { find: jest.Mock };

    it('is rendered as made again from the sources kept in the database', async () => {
      const before = handlebarsTemplate({ name: 'receipt', version: 1, subject: 'Old {{id}}', html: '<p>Old</p>' });
      const versions = stored(async () => ({ ...before, version: HASH }));
      const rendering = renderer([receipt], null, versions);
      const mail = await rendering.render(messageId, templated('receipt', HASH), signal);
      expect(mail).toMatchObject({ subject: 'Old 7', html: '<p>Old</p>' });
      // A numbered version is never looked for there.
      await rendering.render(messageId, templated('receipt', 1), signal);
      expect(versions.find.mock.calls).toEqual([['receipt', HASH]]);
    });

    it.each<{ name: string; find: () => Promise<MailTemplate | undefined>; reason: string }>([
      {
        name: 'kept nowhere',
        find: async () => undefined,
        reason: `template "receipt"@${HASH} is not registered (registered versions: 1) and its sources are not kept in the database; a row renders only with the version it was enqueued with`,
      },
      {
        name: 'kept with sources that no longer make a template',
        find: async () => {
          throw new InvalidTemplateError(
            `"receipt"@${HASH}`,
            'has stored sources that hash to sha256:1, not to its version',
          );
        },
        reason: `template "receipt"@${HASH} cannot be made from its stored sources: has stored sources that hash to sha256:1, not to its version`,
      },
    ])('fails the row permanently when $name', async ({ find, reason }) => {
      const error = await renderError(
        renderer([receipt], null, stored(find)).render(messageId, templated('receipt', HASH), signal),
      );
      expect(error.message).toBe(reason);
    });

    it('is tried again when the database cannot be read: a MailRenderDeferral', async () => {
      const versions = stored(async () => {
        throw new Error('connection terminated');
      });
      const rendering = renderer([receipt], null, versions).render(messageId, templated('receipt', HASH), signal);
      await expect(rendering).rejects.toThrow(MailRenderDeferral);
      await expect(rendering).rejects.toThrow(
        `template "receipt"@${HASH} cannot be made from its stored sources now: connection terminated`,
      );
    });

    it("is tried again when it throws as made with this instance's helpers (a rolling deploy added one)", async () => {
      const newer = handlebarsTemplate({ name: 'receipt', version: 1, subject: 'Hi {{shout id}}', text: 'x' });
      const versions = stored(async () => ({ ...newer, version: HASH }));
      const rendering = renderer([receipt], null, versions).render(messageId, templated('receipt', HASH), signal);
      await expect(rendering).rejects.toThrow(MailRenderDeferral);
      await expect(rendering).rejects.toThrow(
        `template "receipt"@${HASH}, made again from its stored sources with this instance's helpers, failed to ` +
          'render: Missing helper: "shout"; an instance of the deploy that enqueued it may have the helpers it needs',
      );
    });
  });

  it('fails for a payload version it does not know', async () => {
    const error = await renderError(renderer([]).render(messageId, { ...envelope, v: 3 } as never, signal));
    expect(error.message).toBe('payload version 3 is not one this worker can read');
  });
});

describe('MailRenderer attachments', () => {
  const inline = { filename: 'a.txt', contentType: 'text/plain', content: Buffer.from('hello').toString('base64') };
  const payload = (attachments: MailPayloadV2['attachments']): MailPayloadV2 => ({
    v: 2,
    ...envelope,
    subject: 'Hi',
    text: 'x',
    attachments,
  });

  it('decodes inline attachments and resolves references to a Buffer, a Uint8Array or a stream', async () => {
    const stream = Readable.from(['streamed']);
    const resolver = jest.fn(async (ref: string) =>
      ref === 'buffer' ? Buffer.from('buffered') : ref === 'bytes' ? new TextEncoder().encode('bytes') : stream,
    );
    const mail = await renderer([], resolver).render(
      messageId,
      payload([
        inline,
        { filename: 'b.pdf', contentType: 'application/pdf', ref: 'buffer', cid: 'b@x' },
        { filename: 'c.bin', contentType: 'application/octet-stream', ref: 'bytes' },
        { filename: 'd.csv', contentType: 'text/csv', ref: 'stream' },
      ]),
      signal,
    );
    expect(resolver.mock.calls.map(([ref]) => ref)).toEqual(['buffer', 'bytes', 'stream']);
    expect(mail.attachments.map(({ filename, contentType, cid }) => ({ filename, contentType, cid }))).toEqual([
      { filename: 'a.txt', contentType: 'text/plain', cid: undefined },
      { filename: 'b.pdf', contentType: 'application/pdf', cid: 'b@x' },
      { filename: 'c.bin', contentType: 'application/octet-stream', cid: undefined },
      { filename: 'd.csv', contentType: 'text/csv', cid: undefined },
    ]);
    expect((mail.attachments[0].content as Buffer).toString()).toBe('hello');
    expect((mail.attachments[1].content as Buffer).toString()).toBe('buffered');
    expect(Buffer.isBuffer(mail.attachments[2].content) && String(mail.attachments[2].content)).toBe('bytes');
    expect(mail.attachments[3].content).toBe(stream);
  });

  it.each<{ name: string; resolver: AttachmentResolver | null; reason: string }>([
    {
      name: 'the resolver throws',
      resolver: async () => {
        throw new Error('NoSuchKey: big.zip');
      },
      reason: 'attachment "big.zip" (ref "s3://b/big.zip") could not be resolved: NoSuchKey: big.zip',
    },
    {
      name: 'the resolver returns something else',
      resolver: async () => 'text' as never,
      reason:
        'attachment "big.zip" (ref "s3://b/big.zip") could not be resolved: the resolver returned string, not a Buffer or a Readable',
    },
    {
      name: 'no resolver is configured',
      resolver: null,
      reason: 'attachment "big.zip" (ref "s3://b/big.zip") could not be resolved: no attachmentResolver is configured',
    },
  ])('fails when $name', async ({ resolver, reason }) => {
    const error = await renderError(
      renderer([], resolver).render(
        messageId,
        payload([{ filename: 'big.zip', contentType: 'application/zip', ref: 's3://b/big.zip' }]),
        signal,
      ),
    );
    expect(error.message).toBe(reason);
  });

  it('closes the streams it opened when a later attachment fails', async () => {
    const stream = Readable.from(['x']);
    const resolver = async (ref: string) => {
      if (ref === 'ok') return stream;
      throw new Error('gone');
    };
    await renderError(
      renderer([], resolver).render(
        messageId,
        payload([
          { filename: 'a', contentType: 'text/plain', ref: 'ok' },
          { filename: 'b', contentType: 'text/plain', ref: 'missing' },
        ]),
        signal,
      ),
    );
    expect(stream.destroyed).toBe(true);
  });
});
