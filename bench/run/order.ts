// The order of the systems in each repetition of a run: a balanced Latin square (Williams, 1949). Each system runs
// once in each place over as many repetitions as there are systems, and, for an even number of them (the four of a
// default run), after each other system once: a system whose phases leave the server busy (reliable-mail's last
// phase enqueues 50,000 bulk mails) does not always precede the same one. A plain rotation kept the cyclic order,
// so that pg-boss, the queue most ratios are divided by, always ran right after reliable-mail.

/** The systems in the order of repetition `repetition` (from 0). */
export function orderOf<T>(systems: readonly T[], repetition: number): T[] {
  const count = systems.length;
  // The first row goes 0, 1, n-1, 2, n-2, ...; each later row adds one to every place, modulo n.
  const first = Array.from({ length: count }, (_, place) =>
    place % 2 === 1 ? (place + 1) / 2 : (count - place / 2) % count,
  );
  return first.map((index) => systems[(index + repetition) % count]);
}
