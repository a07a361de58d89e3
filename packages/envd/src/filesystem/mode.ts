/**
 * Go's os.FileMode, which E2B's envd puts on the wire: `EntryInfo.mode` is `FileMode.Perm()` and
 * `EntryInfo.permissions` is `FileMode.String()` (e.g. "-rw-r--r--", "drwxr-xr-x", "Lrwxrwxrwx",
 * "dtrwxrwxrwx" for a sticky directory). Clients compare both literally.
 */

const S_IFMT = 0o170000;
const S_IFSOCK = 0o140000;
const S_IFLNK = 0o120000;
const S_IFREG = 0o100000;
const S_IFBLK = 0o060000;
const S_IFDIR = 0o040000;
const S_IFCHR = 0o020000;
const S_IFIFO = 0o010000;
const S_ISUID = 0o4000;
const S_ISGID = 0o2000;
const S_ISVTX = 0o1000;

// Go's mode bits, from the top: d a l T L D p S u g c t ?
export const GO_MODE_DIR = 2 ** 31;
const GO_MODE_SYMLINK = 2 ** 27;
const GO_MODE_DEVICE = 2 ** 26;
const GO_MODE_NAMED_PIPE = 2 ** 25;
const GO_MODE_SOCKET = 2 ** 24;
const GO_MODE_SETUID = 2 ** 23;
const GO_MODE_SETGID = 2 ** 22;
const GO_MODE_CHAR_DEVICE = 2 ** 21;
const GO_MODE_STICKY = 2 ** 20;
const GO_MODE_IRREGULAR = 2 ** 19;

const TYPE_LETTERS = 'dalTLDpSugct?';

/** A Linux st_mode as Go's FileMode (what os.Lstat(...).Mode() returns), as an unsigned number. */
export function goFileMode(stMode: number): number {
  let m = stMode & 0o777;
  switch (stMode & S_IFMT) {
    case S_IFBLK:
      m += GO_MODE_DEVICE;
      break;
    case S_IFCHR:
      m += GO_MODE_DEVICE + GO_MODE_CHAR_DEVICE;
      break;
    case S_IFDIR:
      m += GO_MODE_DIR;
      break;
    case S_IFIFO:
      m += GO_MODE_NAMED_PIPE;
      break;
    case S_IFLNK:
      m += GO_MODE_SYMLINK;
      break;
    case S_IFSOCK:
      m += GO_MODE_SOCKET;
      break;
    case S_IFREG:
      break;
    default:
      m += GO_MODE_IRREGULAR;
  }
  if (stMode & S_ISGID) m += GO_MODE_SETGID;
  if (stMode & S_ISUID) m += GO_MODE_SETUID;
  if (stMode & S_ISVTX) m += GO_MODE_STICKY;
  return m;
}

/** Go's FileMode.String(): type letters (or "-"), then rwxrwxrwx. */
export function goModeString(goMode: number): string {
  let out = '';
  for (let i = 0; i < TYPE_LETTERS.length; i++) {
    // Bit 31 - i; floor division keeps it exact above 2^31 where `>>` would go negative.
    if (Math.floor(goMode / 2 ** (31 - i)) % 2 === 1) out += TYPE_LETTERS[i];
  }
  if (out === '') out = '-';
  const rwx = 'rwxrwxrwx';
  for (let i = 0; i < 9; i++) out += goMode & (1 << (8 - i)) ? rwx[i] : '-';
  return out;
}
