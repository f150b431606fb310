import { ConfigurableModuleBuilder, Inject, Injectable, Module, type OnModuleInit, Optional } from '@nestjs/common';
import { ReliableMailSetupError } from '../../errors.js';
import { MailUnsubscribeService } from '../../unsubscribe/mail-unsubscribe.service.js';
import { MailFeedbackService } from '../mail-feedback.service.js';
import { postmarkWebhookSource } from '../sources/postmark-webhook-source.js';
import { resendWebhookSource } from '../sources/resend-webhook-source.js';
import { sesWebhookSource } from '../sources/ses-webhook-source.js';
import { mailWebhooksControllerAt, WEBHOOKS_OPTIONS } from './mail-webhooks.controller.js';
import {
  type ReliableMailWebhooksOptions,
  type ResolvedWebhooksOptions,
  resolveWebhooksOptions,
} from './webhooks-options.js';

const { ConfigurableModuleClass, MODULE_OPTIONS_TOKEN } = new ConfigurableModuleBuilder<ReliableMailWebhooksOptions>({
  moduleName: 'ReliableMailWebhooks',
})
  .setClassMethodName('forRoot')
  .setExtras({ path: 'webhooks/mail' }, (definition, extras) => ({
    ...definition,
    controllers: [mailWebhooksControllerAt(extras.path)],
  }))
  .build();

/**
 * Loads the configured sources' libraries (a missing one stops start-up, named) and hands them to the service; a
 * module that would serve nothing (no source, and no `unsubscribe` in ReliableMailModule) stops start-up too.
 */
@Injectable()
class WebhookSourceRegistration implements OnModuleInit {
  constructor(
    @Inject(WEBHOOKS_OPTIONS) private readonly options: ResolvedWebhooksOptions,
    @Optional() @Inject(MailFeedbackService) private readonly feedback?: MailFeedbackService,
    @Optional() @Inject(MailUnsubscribeService) private readonly unsubscribes?: MailUnsubscribeService,
  ) {}

  async onModuleInit(): Promise<void> {
    if (!this.feedback) {
      throw new ReliableMailSetupError(
        "ReliableMailWebhooksModule stores what it receives through ReliableMailModule's MailFeedbackService, which " +
          'this module cannot see: register ReliableMailModule.forRoot({ isGlobal: true, … }) (or forRootAsync)',
      );
    }
    if (Object.keys(this.options.sources).length === 0 && !this.unsubscribes?.configured) {
      throw new ReliableMailSetupError(
        'ReliableMailWebhooksModule serves nothing: configure a webhook source (sources: ses, resend, postmark), ' +
          "or ReliableMailModule's unsubscribe option for the one-click unsubscribe route",
      );
    }
    const { ses, resend, postmark } = this.options.sources;
    const sources = await Promise.all([
      ses && sesWebhookSource(ses),
      resend && resendWebhookSource(resend),
      postmark && postmarkWebhookSource(postmark),
    ]);
    for (const source of sources) if (source) this.feedback.addSource(source);
  }
}

/**
 * Routes for providers' delivery feedback webhooks: `ReliableMailWebhooksModule.forRoot({ path, sources })` (or
 * `forRootAsync`, with `path` beside the factory) exposes `POST <path>/<source>` for each configured source, and
 * `<path>/unsubscribe` for the one-click unsubscribe links of ReliableMailModule's `unsubscribe`. Needs
 * `ReliableMailModule` registered with `isGlobal: true`, and the app created with `{ rawBody: true }`: Svix and SNS
 * signatures cover the body as it was sent.
 */
@Module({
  providers: [
    {
      provide: WEBHOOKS_OPTIONS,
      inject: [MODULE_OPTIONS_TOKEN],
      useFactory: (options: ReliableMailWebhooksOptions) => resolveWebhooksOptions(options),
    },
    WebhookSourceRegistration,
  ],
})
export class ReliableMailWebhooksModule extends ConfigurableModuleClass {}
