/**
 * Minimal glob matching for `.dockerignore` and COPY sources: `*` and `?` stay within one path
 * segment, `**` crosses segments, `[...]` is a character class. Paths are `/`-separated.
 */
export function globToRegExp(pattern: string): RegExp {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*') {
      if (pattern[i + 1] === '*') {
        // `**/` matches zero or more directories; a trailing `**` matches everything below.
        const slash = pattern[i + 2] === '/';
        re += slash ? '(?:.*/)?' : '.*';
        i += slash ? 2 : 1;
      } else re += '[^/]*';
    } else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const end = pattern.indexOf(']', i + 1);
      if (end < 0) re += '\\[';
      else {
        const body = pattern
          .slice(i + 1, end)
          .replace(/^!/, '^')
          .replace(/\\/g, '\\\\');
        re += `[${body}]`;
        i = end;
      }
    } else re += c.replace(/[.+^${}()|\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

export function hasGlob(pattern: string): boolean {
  return /[*?[]/.test(pattern);
}

/** `.dockerignore` lines as matchers; comments, blanks and (unsupported) `!` exceptions dropped. */
export function parseIgnoreFile(text: string): RegExp[] {
  return text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#') && !l.startsWith('!'))
    .map((l) => globToRegExp(l.replace(/^\.?\/+/, '').replace(/\/+$/, '')));
}

/** Whether a context-relative path (or one of its parent directories) is ignored. */
export function isIgnored(rel: string, ignore: RegExp[]): boolean {
  const parts = rel.split('/');
  for (let i = 1; i <= parts.length; i++) {
    const prefix = parts.slice(0, i).join('/');
    if (ignore.some((re) => re.test(prefix))) return true;
  }
  return false;
}
