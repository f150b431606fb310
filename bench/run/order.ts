// The order of the systems in each repetition of a run: a balanced Latin square (Williams, 1949). Over a full set of
// repetitions (`fullSet`) each system runs as often in each place, and right after each other system as often: a
// system whose phases leave the server busy (reliable-mail's last phase enqueues 50,000 bulk mails) does not always
// precede the same one. A plain rotation kept the cyclic order, so that pg-boss, the queue most ratios are divided
// by, always ran right after reliable-mail.

/** Repetitions that make a full set: as many as the systems, twice as many for an odd number of them (above one). */
export function fullSet(systems: number): number {
  return systems % 2 === 0 || systems === 1 ? systems : 2 * systems;
}

/** The systems in the order of repetition `repetition` (from 0); past a full set, the orders come round again. */
export function orderOf<T>(systems: readonly T[], repetition: number): T[] {
  const count = systems.length;
  // The first row goes 0, 1, n-1, 2, n-2, ...; each later row adds one to every place, modulo n. With an odd number
  // of systems these n rows put some pairs side by side twice and others never, and their mirror images even it out.
  const first = Array.from({ length: count }, (_, place) =>
    place % 2 === 1 ? (place + 1) / 2 : (count - place / 2) % count,
  );
  const row = repetition % fullSet(count);
  const order = first.map((index) => systems[(index + row) % count]);
  return row < count ? order : order.reverse();
}
