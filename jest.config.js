/** @type {import('jest').Config} */
const swcOptions = {
  jsc: {
    target: 'es2023',
    parser: { syntax: 'typescript', decorators: true },
    transform: { legacyDecorator: true, decoratorMetadata: true },
    keepClassNames: true,
  },
  module: { type: 'es6' },
  sourceMaps: 'inline',
};

export default {
  testEnvironment: 'node',
  // The workspace package resolves to its TypeScript source (see libs/reliable-mail/package.json), so the tests
  // need no build.
  testEnvironmentOptions: { customExportConditions: ['node', 'node-addons', '@reliable-mail/source'] },
  extensionsToTreatAsEsm: ['.ts'],
  transform: { '^.+\\.ts$': ['@swc/jest', swcOptions] },
  moduleNameMapper: {
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  testMatch: ['<rootDir>/libs/**/*.spec.ts', '<rootDir>/test/**/*.e2e-spec.ts', '<rootDir>/apps/**/*.spec.ts'],
  testTimeout: 120_000,
  // Each file works in its own database; two workers keep the 2-core machine responsive for the SMTP servers.
  maxWorkers: 2,
};
