import { MissingPeerDependencyError } from '../../errors.js';

/**
 * Loads a provider's SDK, an optional peer dependency, when its transport is first used: an app installs only the
 * SDK of the provider it sends through. A missing package becomes an error that says what to install.
 */
export async function loadSdk<T>(packageName: string, transport: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND')
      throw new MissingPeerDependencyError(packageName, transport);
    throw error;
  }
}
