/** Milliseconds since the epoch; injected so health and expiry are tested without waiting. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
