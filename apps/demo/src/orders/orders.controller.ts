import { Body, Controller, Get, Param, Post } from '@nestjs/common';
import type { Order } from './order.entity.js';
import { type PlacedOrder, OrdersService } from './orders.service.js';

@Controller('orders')
export class OrdersController {
  constructor(private readonly orders: OrdersService) {}

  /** `{ email, items: [{ sku, qty, price }] }` → `{ orderId, mail: { id, messageId, status } }` */
  @Post()
  place(@Body() body: unknown): Promise<PlacedOrder> {
    return this.orders.place(body);
  }

  @Get(':id')
  get(@Param('id') id: string): Promise<Order> {
    return this.orders.get(id);
  }
}
