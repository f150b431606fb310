import { type DynamicModule, Global, Module } from '@nestjs/common';
import { DEMO_CONFIG, type DemoConfig } from '../demo.config.js';

/** Makes the resolved `DemoConfig` injectable everywhere, including in the async module factories. */
@Global()
@Module({})
export class DemoConfigModule {
  static forRoot(config: DemoConfig): DynamicModule {
    return {
      module: DemoConfigModule,
      providers: [{ provide: DEMO_CONFIG, useValue: config }],
      exports: [DEMO_CONFIG],
    };
  }
}
