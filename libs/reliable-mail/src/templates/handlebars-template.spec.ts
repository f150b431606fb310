import { describe, expect, it } from '@jest/globals';
import { MailValidationError } from '../errors.js';
import { handlebarsTemplate } from './handlebars-template.js';
import { InvalidTemplateError, type StandardSchemaLike } from './mail-template.js';

const context = { messageId: '<m1@test.example.com>', signal: new AbortController().signal };

const orderConfirmation = handlebarsTemplate({
  name: 'order-confirmation',
  version: 1,
  subject: 'Order {{orderId}} confirmed, {{name}}',
  html: '<p>Hi {{name}},</p><ul>{{#each items}}<li>{{qty}} x {{sku}}</li>{{/each}}</ul><p>Total: {{total}}</p><p><a href="https://shop.example.com/orders/{{orderId}}">Your order</a></p>',
});

function thrownBy(action: () => unknown): unknown {
  try {
    action();
  } catch (error) {
    return error;
  }
  throw new Error('nothing was thrown');
}

describe('handlebarsTemplate', () => {
  it('renders subject and html, and derives the text part from the html', async () => {
    const rendered = await orderConfirmation.render(
      {
        orderId: 'A-7',
        name: 'Ann',
        items: [
          { sku: 'MUG', qty: 2 },
          { sku: 'TEA', qty: 1 },
        ],
        total: '12.50 EUR',
      },
      context,
    );
    expect(rendered).toEqual({
      subject: 'Order A-7 confirmed, Ann',
      html: '<p>Hi Ann,</p><ul><li>2 x MUG</li><li>1 x TEA</li></ul><p>Total: 12.50 EUR</p><p><a href="https://shop.example.com/orders/A-7">Your order</a></p>',
      text: 'Hi Ann,\n\n- 2 x MUG\n- 1 x TEA\n\nTotal: 12.50 EUR\n\nYour order (https://shop.example.com/orders/A-7)',
    });
  });

  it('escapes parameters in the html part, not in the subject or an explicit text part', async () => {
    const template = handlebarsTemplate({
      name: 't',
      version: 1,
      subject: 'Hi {{name}}',
      html: '<p>Hi {{name}}</p>',
      text: 'Hi {{name}}',
    });
    const name = '<script>alert("x")</script> & Co';
    const rendered = await template.render({ name }, context);
    expect(rendered.html).toBe('<p>Hi &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; Co</p>');
    expect(rendered.html).not.toContain('<script>');
    expect(rendered.subject).toBe(`Hi ${name}`);
    expect(rendered.text).toBe(`Hi ${name}`);
  });

  it('the derived text shows escaped markup as text, not as tags', async () => {
    const template = handlebarsTemplate({ name: 't', version: 1, subject: 's', html: '<p>Hi {{name}}</p>' });
    expect((await template.render({ name: '<b>Ann</b>' }, context)).text).toBe('Hi <b>Ann</b>');
  });

  it('triple braces insert raw html on purpose', async () => {
    const template = handlebarsTemplate({ name: 't', version: 1, subject: 's', html: '<div>{{{block}}}</div>' });
    expect((await template.render({ block: '<b>bold</b>' }, context)).html).toBe('<div><b>bold</b></div>');
  });

  it('folds line breaks a parameter puts into the subject', async () => {
    const template = handlebarsTemplate({ name: 't', version: 1, subject: 'Hi {{name}}', html: 'x' });
    expect((await template.render({ name: 'Ann\r\nBcc: evil@example.com' }, context)).subject).toBe(
      'Hi Ann Bcc: evil@example.com',
    );
  });

  it('picks sources by locale: exact tag, then language, then the defaults; @locale is available', async () => {
    const template = handlebarsTemplate({
      name: 't',
      version: 1,
      subject: 'Your order {{id}}',
      html: '<p>Thanks ({{@locale}})</p>',
      locales: {
        de: { subject: 'Ihre Bestellung {{id}}', html: '<p>Danke ({{@locale}})</p>' },
        'de-CH': { subject: 'Ihri Bstellig {{id}}' },
      },
    });
    const render = (locale?: string) => template.render({ id: 7 }, { ...context, locale });
    expect(await render()).toMatchObject({ subject: 'Your order 7', html: '<p>Thanks ()</p>' });
    expect(await render('en-GB')).toMatchObject({ subject: 'Your order 7', html: '<p>Thanks (en-GB)</p>' });
    expect(await render('de-AT')).toMatchObject({ subject: 'Ihre Bestellung 7', html: '<p>Danke (de-AT)</p>' });
    // de-CH overrides only the subject; its html falls back to the defaults, not to `de`.
    expect(await render('de-CH')).toMatchObject({ subject: 'Ihri Bstellig 7', html: '<p>Thanks (de-CH)</p>' });
  });

  it('has helpers and partials of its own', async () => {
    const template = handlebarsTemplate({
      name: 't',
      version: 1,
      subject: '{{upper name}}',
      html: '{{> footer}}',
      helpers: { upper: (value: string) => value.toUpperCase() },
      partials: { footer: '<p>Bye {{name}}</p>' },
    });
    expect(await template.render({ name: 'ann' }, context)).toMatchObject({ subject: 'ANN', html: '<p>Bye ann</p>' });
    const other = handlebarsTemplate({ name: 'u', version: 1, subject: '{{upper name}}', html: 'x' });
    expect(() => other.render({ name: 'ann' }, context)).toThrow(/upper/);
  });

  it('wraps html and text in layouts: the default one, one named on the first line, or none', async () => {
    const layouts = {
      main: { html: '<body>{{{body}}}<p>{{shop}}</p></body>', text: '{{{body}}}\n-- {{shop}}' },
      plain: { html: '<div>{{body}}</div>' },
    };
    const render = (sources: { html?: string; text?: string }) =>
      handlebarsTemplate({ name: 't', version: 1, subject: 's', ...sources, layouts, defaultLayout: 'main' }).render(
        { name: '<Ann>', shop: 'Shop' },
        context,
      );
    expect(await render({ html: '<p>Hi {{name}}</p>' })).toMatchObject({
      html: '<body><p>Hi &lt;Ann&gt;</p><p>Shop</p></body>',
      text: 'Hi <Ann>\n\nShop',
    });
    expect(await render({ html: '{{!< plain}}\n<p>Hi</p>', text: 'Hi {{name}}' })).toEqual({
      subject: 's',
      html: '<div><p>Hi</p></div>',
      text: 'Hi <Ann>\n-- Shop',
    });
    expect(await render({ html: '{{!< none}}\n<p>Hi</p>', text: '{{!<none}}\nHi' })).toMatchObject({
      html: '<p>Hi</p>',
      text: 'Hi',
    });
    expect(() => handlebarsTemplate({ name: 't', version: 1, subject: 's', text: '{{!< plain}}x', layouts })).toThrow(
      /names layout "plain", which has no text part/,
    );
  });

  it('a text-only template has no html part', async () => {
    const template = handlebarsTemplate({ name: 't', version: 1, subject: 's', text: 'Hi {{name}}' });
    expect(await template.render({ name: 'Ann' }, context)).toEqual({ subject: 's', text: 'Hi Ann' });
  });

  it('transforms the rendered html before the text part is derived from it', async () => {
    const template = handlebarsTemplate({
      name: 't',
      version: 1,
      subject: 's',
      html: '<x-note>{{name}}</x-note>',
      transformHtml: async (html) => html.replace(/x-note/g, 'p'),
    });
    expect(await template.render({ name: 'Ann' }, context)).toEqual({ subject: 's', html: '<p>Ann</p>', text: 'Ann' });
  });

  it('renders a missing parameter as empty, or throws in strict mode', async () => {
    const lenient = handlebarsTemplate({ name: 't', version: 1, subject: 'Order {{orderId}}', html: 'x' });
    expect((await lenient.render({}, context)).subject).toBe('Order');
    const strict = handlebarsTemplate({ name: 't', version: 1, subject: 'Order {{orderId}}', html: 'x', strict: true });
    expect(() => strict.render({}, context)).toThrow(/orderId/);
  });

  it('reports a syntax error when it is made, naming the part', () => {
    const error = thrownBy(() =>
      handlebarsTemplate({ name: 'broken', version: 3, subject: 's', html: '<p>{{#each items}}</p>' }),
    );
    expect(error).toBeInstanceOf(InvalidTemplateError);
    expect((error as Error).message).toMatch(/"broken"@3: has a html that does not parse/);
    expect(() =>
      handlebarsTemplate({ name: 't', version: 1, subject: 's', html: 'x', locales: { de: { text: '{{' } } }),
    ).toThrow(/locales\.de\.text/);
    expect(() => handlebarsTemplate({ name: 't', version: 1, subject: 's' })).toThrow(/needs html/);
  });

  it('validates parameters with a Standard Schema', () => {
    const schema: StandardSchemaLike = {
      '~standard': {
        version: 1,
        vendor: 'test',
        validate: (value) =>
          typeof (value as { total?: unknown }).total === 'number'
            ? { value }
            : {
                issues: [
                  { message: 'Expected number', path: ['total'] },
                  { message: 'Required', path: ['items', { key: 0 }, 'sku'] },
                ],
              },
      },
    };
    const template = handlebarsTemplate({ name: 't', version: 1, subject: 's', html: 'x', schema });
    expect(() => template.validate!({ total: 12 })).not.toThrow();
    const error = thrownBy(() => template.validate!({ total: '12' }));
    expect(error).toBeInstanceOf(MailValidationError);
    expect(error).toMatchObject({ field: 'params.total', reason: 'is invalid: Expected number (and 1 more)' });
  });

  it('has no validate without a schema', () => {
    expect(orderConfirmation.validate).toBeUndefined();
  });
});
