import { EntityManager } from '@mikro-orm/postgresql';
import { BadRequestException, Inject, Injectable, NotFoundException } from '@nestjs/common';
import { MailOutboxService, type OutgoingMail } from '@reliable-mail/nestjs';
import { emailField, objectBody } from '../common/input.js';
import { DEMO_CONFIG, type DemoConfig } from '../demo.config.js';
import { orderConfirmationTemplate } from './order-confirmation.template.js';
import { Order, type OrderItem } from './order.entity.js';

export interface PlacedOrder {
  orderId: number;
  mail: { id: string; messageId: string; status: string };
}

const MAX_ITEMS = 100;

function parseItems(value: unknown): OrderItem[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_ITEMS) {
    throw new BadRequestException(`items must be an array of 1 to ${MAX_ITEMS} { sku, qty, price }`);
  }
  return value.map((item: unknown, index): OrderItem => {
    const { sku, qty, price } = (item && typeof item === 'object' ? item : {}) as Record<string, unknown>;
    if (typeof sku !== 'string' || !/^[\w.-]{1,64}$/.test(sku)) {
      throw new BadRequestException(`items[${index}].sku must be 1 to 64 letters, digits, '.', '-' or '_'`);
    }
    if (typeof qty !== 'number' || !Number.isInteger(qty) || qty < 1 || qty > 10_000) {
      throw new BadRequestException(`items[${index}].qty must be an integer from 1 to 10000`);
    }
    // At most 2 decimals, allowing for binary floating point (1.1 * 100 is 110.00000000000001).
    if (
      typeof price !== 'number' ||
      !Number.isFinite(price) ||
      price < 0 ||
      price > 1_000_000 ||
      Math.abs(price * 100 - Math.round(price * 100)) > 1e-6
    ) {
      throw new BadRequestException(`items[${index}].price must be a number from 0 to 1000000 with at most 2 decimals`);
    }
    return { sku, qty, price };
  });
}

/** Sums in cents, so that 0.1 + 0.2 stays 0.30. */
function totalOf(items: OrderItem[]): number {
  return items.reduce((cents, { qty, price }) => cents + qty * Math.round(price * 100), 0) / 100;
}

const money = (amount: number) => amount.toFixed(2);

@Injectable()
export class OrdersService {
  constructor(
    private readonly em: EntityManager,
    private readonly outbox: MailOutboxService,
    @Inject(DEMO_CONFIG) private readonly config: DemoConfig,
  ) {}

  /**
   * Inserts the order and enqueues its confirmation in ONE transaction: either both are committed or neither is,
   * so a confirmation is never sent for an order that was rolled back, nor lost for one that was committed.
   */
  async place(input: unknown): Promise<PlacedOrder> {
    const body = objectBody(input);
    const email = emailField(body);
    const items = parseItems(body.items);
    const total = totalOf(items);

    return this.em.transactional(async (em) => {
      const order = em.create(Order, { customerEmail: email, items, total });
      await em.flush(); // the id is needed for the idempotency key and the mail
      const mail = await this.outbox.enqueue(this.confirmationMail(order), {
        em,
        idempotencyKey: `order-confirmation:${order.id}`,
        metadata: { source: 'orders', orderId: order.id },
      });
      return { orderId: order.id, mail: { id: mail.id, messageId: mail.messageId, status: mail.status } };
    });
  }

  async get(id: string): Promise<Order> {
    const orderId = Number(id);
    const order =
      Number.isSafeInteger(orderId) && orderId > 0 ? await this.em.fork().findOne(Order, { id: orderId }) : null;
    if (!order) throw new NotFoundException(`No order with id ${id}`);
    return order;
  }

  private confirmationMail(order: Order): OutgoingMail {
    return {
      to: order.customerEmail,
      template: orderConfirmationTemplate.name,
      params: {
        orderId: order.id,
        lines: order.items.map(({ sku, qty, price }) => ({
          sku,
          qty,
          price: money(price),
          amount: money(qty * price),
        })),
        total: money(order.total),
        link: `${this.config.baseUrl}/orders/${order.id}`,
      },
      headers: { 'X-Demo-Order-Id': String(order.id) },
    };
  }
}
