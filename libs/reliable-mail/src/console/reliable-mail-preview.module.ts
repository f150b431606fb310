import { type DynamicModule, Module } from '@nestjs/common';
import { ReliableMailConsoleModule } from './reliable-mail-console.module.js';

/**
 * For development: the newest mails, each rendered as its recipients would see it (whatever the transport: SMTP,
 * `EmlFileTransport`, a capture), at `path` (default `mail-preview`). It is the console with the preview as its
 * home, read-only, answering loopback requests only, and it refuses to start when NODE_ENV is production. An app
 * that mounts `ReliableMailConsoleModule` has the same page there (Preview). Needs `ReliableMailModule` registered
 * with `isGlobal: true`.
 */
@Module({})
export class ReliableMailPreviewModule {
  static forRoot({ path = 'mail-preview' }: { path?: string } = {}): DynamicModule {
    return {
      module: ReliableMailPreviewModule,
      imports: [
        ReliableMailConsoleModule.forRoot({ path, allowUnauthenticated: true, readOnly: true, home: 'preview' }),
      ],
    };
  }
}
