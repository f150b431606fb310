import { ConfigurableModuleBuilder, Module } from '@nestjs/common';
import { ConsoleActions } from './console-actions.js';
import { CONSOLE_OPTIONS, consoleControllerAt } from './console.controller.js';
import { type ReliableMailConsoleOptions, resolveConsoleOptions } from './console-options.js';
import { ConsoleReader } from './console-reader.js';

const CONSOLE_PATH = Symbol('reliable-mail:console-path');

const { ConfigurableModuleClass, MODULE_OPTIONS_TOKEN } = new ConfigurableModuleBuilder<ReliableMailConsoleOptions>({
  moduleName: 'ReliableMailConsole',
})
  .setClassMethodName('forRoot')
  .setExtras({ path: 'mail' }, (definition, extras) => ({
    ...definition,
    controllers: [consoleControllerAt(extras.path)],
    providers: [...(definition.providers ?? []), { provide: CONSOLE_PATH, useValue: extras.path }],
  }))
  .build();

/**
 * A web console for the outbox, served by the app at `path` (default `mail`), on Express or Fastify:
 * `ReliableMailConsoleModule.forRoot({ path, authorize, readOnly })`, or `forRootAsync` with `path` beside the
 * factory. Every request asks the app's `authorize`; without it the start fails, unless `allowUnauthenticated`
 * (refused in production). Needs `ReliableMailModule` registered with `isGlobal: true`.
 */
@Module({
  providers: [
    {
      provide: CONSOLE_OPTIONS,
      inject: [MODULE_OPTIONS_TOKEN, CONSOLE_PATH],
      useFactory: (options: ReliableMailConsoleOptions, path: string) => resolveConsoleOptions(path, options),
    },
    ConsoleReader,
    ConsoleActions,
  ],
})
export class ReliableMailConsoleModule extends ConfigurableModuleClass {}
