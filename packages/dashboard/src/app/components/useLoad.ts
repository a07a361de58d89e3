import { useEffect, useRef, useState } from 'preact/hooks';
import { describeError } from '../api.js';

/**
 * Loads `fn()` now and again whenever `deps` change, at most once per `waitMs` when they
 * change in bursts (a stream of events). Keeps the last good value while reloading.
 */
export function useLoad<T>(fn: () => Promise<T>, deps: unknown[], waitMs = 250) {
  const [value, setValue] = useState<T | undefined>(undefined);
  const [error, setError] = useState('');
  const timer = useRef<number | undefined>(undefined);
  const seq = useRef(0);
  const first = useRef(true);
  useEffect(() => {
    const run = () => {
      const mine = ++seq.current;
      fn().then(
        (v) => {
          if (mine !== seq.current) return;
          setValue(v);
          setError('');
        },
        (err: unknown) => mine === seq.current && setError(describeError(err)),
      );
    };
    if (first.current) {
      first.current = false;
      run();
    } else {
      clearTimeout(timer.current);
      timer.current = window.setTimeout(run, waitMs);
    }
  }, deps);
  useEffect(() => () => clearTimeout(timer.current), []);
  const reload = () => {
    const mine = ++seq.current;
    return fn().then(
      (v) => mine === seq.current && setValue(v),
      (err: unknown) => setError(describeError(err)),
    );
  };
  return { value, error, reload };
}
