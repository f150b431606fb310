import { ReliableMailError } from '../errors.js';

/**
 * Loads an optional peer dependency on first use, so an app installs only the libraries of the feedback sources
 * it uses; a missing one is named with the command that installs it.
 */
export async function loadOptionalPeer<T>(load: () => Promise<T>, name: string, purpose: string): Promise<T> {
  try {
    return await load();
  } catch (error) {
    throw new ReliableMailError(`${purpose} needs the package ${name} (npm install ${name}): ${String(error)}`);
  }
}
