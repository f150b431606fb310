import { cutText } from '../database/storable.js';

/** A value as an error message shows it: its JSON, cut to 100 characters, or its type where JSON has no text for it. */
export function shown(value: unknown): string {
  try {
    const json = JSON.stringify(value);
    if (json !== undefined) return cutText(json, 100);
  } catch {
    // A bigint or a cycle: JSON has no text for it.
  }
  return `a ${typeof value}`;
}
