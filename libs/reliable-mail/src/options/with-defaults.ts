/**
 * The defaults with what was given over them, where an option given as `undefined` counts as not given: an app's
 * `{ url: process.env.DATABASE_URL }` with the variable unset takes the default rather than failing as no URL.
 */
export function withDefaults<T extends object>(defaults: T, given: { [K in keyof T]?: T[K] } | undefined): T {
  const merged: T = { ...defaults };
  for (const key of Object.keys(given ?? {}) as Array<keyof T>) {
    const value = given![key];
    if (value !== undefined) merged[key] = value;
  }
  return merged;
}
