import { closeSync, constants, fstatSync, openSync, readFileSync, writeSync } from 'node:fs';
import path from 'node:path';
import { type Challenge, SudoRefusal } from './protocol.js';

/**
 * How a client proves its uid to envd. Node has no SO_PEERCRED, and gVisor (2024-07-29) answers
 * SO_PEERCRED with the asking process's own credentials anyway, so the peer of a Unix socket
 * cannot be identified from the socket. Instead envd sends a random nonce over the connection
 * and the client creates `<dir>/<nonce>` holding the nonce: the kernel makes the file's owner
 * the uid of the process that created it.
 *
 * Sound because: only the peer of this connection was sent the nonce (128 random bits, used
 * once, the file removed at once); <dir> is root's, mode 01733, so others can neither list it
 * to learn names nor delete or rename the files in it; and the checks below rule out a file
 * made earlier by someone else and moved or linked into place: it must be a regular file, not a
 * symlink, with one link, writable by its owner only (so nobody but its owner, or root, can have
 * written the nonce into it after the nonce existed), holding exactly the nonce.
 */

const NONCE = /^[0-9a-f]{32}$/;

/** Client side: creates the proof file for a challenge (never following or reusing a file). */
export function writeProof(challenge: Challenge): void {
  if (!NONCE.test(challenge.nonce) || !path.isAbsolute(challenge.dir)) {
    throw new Error('invalid challenge from envd');
  }
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
  const fd = openSync(path.join(challenge.dir, challenge.nonce), flags, 0o600);
  try {
    writeSync(fd, challenge.nonce);
  } finally {
    closeSync(fd);
  }
}

/** Server side: the uid that proved itself with `<dir>/<nonce>`; throws SudoRefusal otherwise. */
export function verifyProof(dir: string, nonce: string): number {
  let fd: number;
  try {
    fd = openSync(path.join(dir, nonce), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    throw new SudoRefusal(`could not verify who you are: ${(err as NodeJS.ErrnoException).code ?? err}`);
  }
  try {
    const st = fstatSync(fd);
    const ok =
      st.isFile() &&
      st.nlink === 1 &&
      (st.mode & 0o022) === 0 &&
      st.size === nonce.length &&
      readFileSync(fd, 'utf8') === nonce;
    if (!ok) throw new SudoRefusal('could not verify who you are: invalid proof file');
    return st.uid;
  } finally {
    closeSync(fd);
  }
}
