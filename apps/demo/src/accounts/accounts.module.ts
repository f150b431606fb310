import { Module } from '@nestjs/common';
import { PasswordResetController } from './password-reset.controller.js';

/** `POST /password-reset`. */
@Module({
  controllers: [PasswordResetController],
})
export class AccountsModule {}
