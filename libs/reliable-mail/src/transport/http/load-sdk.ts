import { MissingPeerDependencyError } from '../../errors.js';

/**
 * Loads an optional peer dependency (a provider's SDK, a webhook verifier) when what needs it is first used: an app
 * installs only the packages of the providers it uses. A missing package becomes an error that says what to install.
 */
export async function loadSdk<T>(packageName: string, usedBy: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND')
      throw new MissingPeerDependencyError(packageName, usedBy);
    throw error;
  }
}
