/** timestamptz as pg returns it (a Date), or as text where a JSON document carried it. */
export const toDate = (value: Date | string): Date => (value instanceof Date ? value : new Date(value));
export const toDateOrNull = (value: Date | string | null | undefined): Date | null =>
  value === null || value === undefined ? null : toDate(value);
