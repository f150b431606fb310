import { MissingPeerDependencyError } from '../errors.js';

/** Whether `error` says that the package itself is not installed (not some module it imports). */
function isMissing(error: unknown, packageName: string): boolean {
  const { code, message } = error as { code?: string; message?: string };
  return (
    (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && String(message).includes(`'${packageName}`)
  );
}

/**
 * Loads an optional peer dependency (a provider's SDK, a webhook verifier) when what needs it is first used: an app
 * installs only the packages of the providers it uses. A missing package becomes an error that says what to install.
 */
export async function loadSdk<T>(packageName: string, usedBy: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    if (isMissing(error, packageName)) throw new MissingPeerDependencyError(packageName, usedBy);
    throw error;
  }
}

/** Loads a package the app may or may not use (its ORM, a transaction library); null where it is not installed. */
export async function loadIfInstalled<T>(packageName: string, load: () => Promise<T>): Promise<T | null> {
  try {
    return await load();
  } catch (error) {
    if (isMissing(error, packageName)) return null;
    throw error;
  }
}
