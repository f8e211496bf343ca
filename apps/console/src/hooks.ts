import { useCallback, useEffect, useRef, useState } from 'react';
import { errorText } from './api';

/** The part of the URL after #, split into segments: `#/runs/run_1` → ['runs', 'run_1']. */
export function useRoute(): string[] {
  const read = () => window.location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const changed = () => setRoute(read());
    window.addEventListener('hashchange', changed);
    return () => window.removeEventListener('hashchange', changed);
  }, []);
  return route;
}

export function go(...segments: string[]): void {
  window.location.hash = `#/${segments.map(encodeURIComponent).join('/')}`;
}

export interface Loaded<T> {
  data: T | undefined;
  error: string | null;
  loading: boolean;
  reload: () => void;
}

/**
 * Loads with `load` when `key` changes, and again every `pollMs` when given (lists that
 * update live). A slow answer never overwrites a newer one.
 */
export function useLoad<T>(load: (signal: AbortSignal) => Promise<T>, key: string, pollMs?: number): Loaded<T> {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  useEffect(() => {
    const abort = new AbortController();
    setLoading(true);
    loadRef.current(abort.signal).then(
      (value) => {
        if (abort.signal.aborted) return;
        setData(value);
        setError(null);
        setLoading(false);
      },
      (err: unknown) => {
        if (abort.signal.aborted) return;
        setError(errorText(err));
        setLoading(false);
      },
    );
    const timer = pollMs ? setTimeout(() => setTick((t) => t + 1), pollMs) : undefined;
    return () => {
      abort.abort();
      clearTimeout(timer);
    };
  }, [key, tick, pollMs]);
  useEffect(() => setData(undefined), [key]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, loading, reload };
}

/** Runs an action, keeping its error for display; `busy` while it runs. */
export function useAction(): { busy: boolean; error: string | null; run: (action: () => Promise<void>) => Promise<void> } {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = useCallback(async (action: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await action();
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run };
}
