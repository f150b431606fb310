import { handlebarsTemplate } from '@reliable-mail/nestjs';

/** The order confirmation: rendered when it is sent, from the parameters stored with the outbox row. */
export const orderConfirmationTemplate = handlebarsTemplate({
  name: 'order-confirmation',
  version: 1,
  subject: 'Your order #{{orderId}} is confirmed',
  html: `<p>Thank you for your order #{{orderId}}.</p>
<ul>{{#each lines}}<li>{{qty}} x {{sku}} @ {{price}} = {{amount}}</li>{{/each}}</ul>
<p><strong>Total: {{total}}</strong></p>
<p><a href="{{link}}">See your order</a></p>`,
});
