import { describe, expect, it } from '@jest/globals';
import { decodeEntities, htmlToText } from './html-to-text.js';

describe('htmlToText', () => {
  it.each<{ name: string; html: string; text: string }>([
    { name: 'plain text stays', html: 'Hello there', text: 'Hello there' },
    { name: 'paragraphs are separated by a blank line', html: '<p>One</p><p>Two</p>', text: 'One\n\nTwo' },
    { name: 'source whitespace collapses', html: '<p>Hello\n      world</p>', text: 'Hello world' },
    { name: 'br is a line break', html: 'a<br>b<br/>c<br />d', text: 'a\nb\nc\nd' },
    { name: 'headings are blocks', html: '<h1>Order</h1>Thanks', text: 'Order\n\nThanks' },
    { name: 'list items become dashes', html: '<ul><li>One</li><li>Two</li></ul>', text: '- One\n- Two' },
    {
      name: 'table rows are lines, cells are spaced',
      html: '<table><tr><td>2 x</td><td>Mug</td></tr><tr><td>1 x</td><td>Tea</td></tr></table>',
      text: '2 x Mug\n1 x Tea',
    },
    {
      name: 'a link keeps its URL',
      html: '<a href="https://shop.example.com/orders/7">See your order</a>',
      text: 'See your order (https://shop.example.com/orders/7)',
    },
    {
      name: 'a link with single quotes and other attributes',
      html: "<a class='btn' href='https://x.example.com/a?b=1&amp;c=2' target=_blank>Go</a>",
      text: 'Go (https://x.example.com/a?b=1&c=2)',
    },
    { name: 'an unquoted href', html: '<a href=https://x.example.com>Go</a>', text: 'Go (https://x.example.com)' },
    {
      name: 'a link whose label is its URL is not repeated',
      html: '<a href="https://x.example.com">https://x.example.com</a>',
      text: 'https://x.example.com',
    },
    {
      name: 'a mailto link whose label is the address',
      html: '<a href="mailto:help@example.com">help@example.com</a>',
      text: 'help@example.com',
    },
    {
      name: 'a link around an image only is its URL',
      html: '<a href="https://x.example.com"><img src="logo.png"></a>',
      text: 'https://x.example.com',
    },
    {
      name: 'a link with markup inside',
      html: '<a href="https://x.example.com"><strong>Pay</strong> now</a>',
      text: 'Pay now (https://x.example.com)',
    },
    {
      name: 'anchors and javascript: links lose the URL',
      html: '<a href="#top">Top</a> <a href="javascript:void(0)">Click</a>',
      text: 'Top Click',
    },
    {
      name: 'style, script, head and comments are dropped',
      html: '<html><head><title>T</title><style>p{color:red}</style></head><body><!-- c --><script>alert(1)</script><p>Body</p></body></html>',
      text: 'Body',
    },
    {
      name: 'entities are decoded once',
      html: '<p>&lt;b&gt; &amp;amp; &quot;q&quot; &#39;s&#39; &#x263A; &nbsp;x &euro;5 &unknown;</p>',
      text: '<b> &amp; "q" \'s\' ☺ x €5 &unknown;',
    },
    {
      name: 'escaped markup from parameters stays text',
      html: '<p>Hi &lt;script&gt;alert(1)&lt;/script&gt;</p>',
      text: 'Hi <script>alert(1)</script>',
    },
    {
      name: 'a URL with an entity-like text is not decoded twice',
      html: '<a href="https://x.example.com/?q=&amp;lt;">Go</a>',
      text: 'Go (https://x.example.com/?q=&lt;)',
    },
    { name: 'no more than one blank line', html: '<div><p>A</p></div><div></div><div><p>B</p></div>', text: 'A\n\nB' },
    {
      // The text part marks where a link's URL and a block's edges go with these characters: written as references
      // in a parameter, they put the first link's URL (or "undefined") and blank lines where the sender wrote none.
      name: "the markers' characters, written as references, are dropped",
      html: '<a href="https://x.example.com/">Go</a> &#xE000;0&#xE000; &#xe002;&#57345;&#x0E001;!',
      text: 'Go (https://x.example.com/) 0 !',
    },
  ])('$name', ({ html, text }) => {
    expect(htmlToText(html)).toBe(text);
  });
});

describe('decodeEntities', () => {
  it.each([
    ['&amp;', '&'],
    ['&AMP;', '&'],
    ['&#65;&#x42;&#X43;', 'ABC'],
    ['&#0;', '&#0;'],
    ['&#x110000;', '&#x110000;'],
    ['&nosuch;', '&nosuch;'],
    ['a & b', 'a & b'],
  ])('%s -> %s', (input, output) => {
    expect(decodeEntities(input)).toBe(output);
  });
});
