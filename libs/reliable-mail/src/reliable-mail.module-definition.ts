import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { ReliableMailOptions } from './reliable-mail.options.js';

export const {
  ConfigurableModuleClass: ConfigurableReliableMailModule,
  MODULE_OPTIONS_TOKEN: RELIABLE_MAIL_OPTIONS,
  OPTIONS_TYPE: RELIABLE_MAIL_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: RELIABLE_MAIL_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<ReliableMailOptions>({ moduleName: 'ReliableMail' })
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: false }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();
