import { describe, expect, it } from '@jest/globals';
import { MissingPeerDependencyError } from '../errors.js';
import { loadIfInstalled, loadSdk } from './optional-package.js';

const missing = '@reliable-mail/no-such-sdk';

describe('loadSdk', () => {
  it('a provider SDK that is not installed is a MissingPeerDependencyError that says what to install', async () => {
    const load = loadSdk(missing, 'Example', () => import(missing));
    await expect(load).rejects.toThrow(MissingPeerDependencyError);
    await expect(load).rejects.toThrow('npm install @reliable-mail/no-such-sdk');
  });
});

describe('loadIfInstalled', () => {
  it('a package that is not installed is null', async () => {
    await expect(loadIfInstalled(missing, () => import(missing))).resolves.toBeNull();
  });

  it('an installed package whose own import fails is that failure, not a missing package', async () => {
    await expect(loadIfInstalled('@nestjs/common', () => import(missing))).rejects.toThrow(missing);
  });
});
