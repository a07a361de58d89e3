import { useEffect, useState } from 'preact/hooks';

/** The current time, moving every `everyMs`: ages and time-left cells count on their own. */
export function useNow(everyMs: number): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = window.setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(t);
  }, [everyMs]);
  return now;
}
