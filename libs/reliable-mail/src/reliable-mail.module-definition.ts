import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { ReliableMailOptions } from './options/reliable-mail-options.interface.js';

/** `forRoot` / `forRootAsync`, and the token of the options as the app gave them (resolved in the providers). */
export const { ConfigurableModuleClass: ConfigurableReliableMailModule, MODULE_OPTIONS_TOKEN: MODULE_OPTIONS } =
  new ConfigurableModuleBuilder<ReliableMailOptions>({ moduleName: 'ReliableMail' })
    .setClassMethodName('forRoot')
    .setExtras({ isGlobal: false }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
    .build();
