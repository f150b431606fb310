import { Module } from '@nestjs/common';
import { OutboxController } from './outbox.controller.js';

/** `GET /outbox/:id`. */
@Module({
  controllers: [OutboxController],
})
export class OutboxModule {}
