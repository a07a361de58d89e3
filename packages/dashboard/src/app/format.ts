/** Display helpers: short, fixed-width-ish strings for tables and cards. */

export function bytes(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v >= 100 || i === 0 ? Math.round(v) : v.toFixed(1)} ${units[i]}`;
}

export function mib(n: number | undefined): string {
  return n === undefined ? '–' : bytes(n * 2 ** 20);
}

/** 950 → "950 ms", 1500 → "1.50 s". */
export function ms(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '–';
  return n < 1000 ? `${Math.round(n)} ms` : `${(n / 1000).toFixed(2)} s`;
}

/** A span of seconds as "42 s", "5 m", "3 h 2 m", "4 d". */
export function span(secs: number): string {
  const s = Math.max(0, Math.round(secs));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} m`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} m`;
  return `${Math.floor(s / 86_400)} d`;
}

export function age(iso: string, now = Date.now()): string {
  return span((now - Date.parse(iso)) / 1000);
}

/** Time until `endAt`; paused sandboxes do not expire. */
export function timeLeft(endAt: string, state: string, now = Date.now()): string {
  if (state === 'paused') return '–';
  const left = (Date.parse(endAt) - now) / 1000;
  return left <= 0 ? 'expiring' : span(left);
}

export function pct(n: number | undefined): string {
  return n === undefined || !Number.isFinite(n) ? '–' : `${n.toFixed(n < 10 ? 1 : 0)} %`;
}

export function time(iso: string): string {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleTimeString(undefined, { hour12: false });
}
