import { Module } from '@nestjs/common';
import { OrdersController } from './orders.controller.js';
import { OrdersService } from './orders.service.js';

/** `POST /orders`, `GET /orders/:id`. MailOutboxService comes from the global ReliableMailModule. */
@Module({
  controllers: [OrdersController],
  providers: [OrdersService],
})
export class OrdersModule {}
