import { readFileSync } from 'node:fs';
import { notFound, unauthenticated } from './errors.js';

export interface SystemUser {
  name: string;
  uid: number;
  gid: number;
  home: string;
  shell: string;
}

/** Parses /etc/passwd text. Malformed lines are skipped: the file is not ours to validate. */
export function parsePasswd(text: string): SystemUser[] {
  const users: SystemUser[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const f = line.split(':');
    if (f.length < 7) continue;
    const uid = Number(f[2]);
    const gid = Number(f[3]);
    if (!Number.isInteger(uid) || !Number.isInteger(gid)) continue;
    users.push({ name: f[0]!, uid, gid, home: f[5] || '/', shell: f[6] || '/bin/sh' });
  }
  return users;
}

export interface SystemGroup {
  name: string;
  gid: number;
  /** The user names listed in the group's fourth field (not users whose primary group it is). */
  members: string[];
}

/** Parses /etc/group text; malformed lines are skipped. */
export function parseGroups(text: string): SystemGroup[] {
  const groups: SystemGroup[] = [];
  for (const line of text.split('\n')) {
    const f = line.split(':');
    if (f.length < 3) continue;
    const gid = Number(f[2]);
    if (!Number.isInteger(gid)) continue;
    const members = (f[3] ?? '')
      .split(',')
      .map((m) => m.trim())
      .filter(Boolean);
    groups.push({ name: f[0]!, gid, members });
  }
  return groups;
}

/** Parses /etc/group text into gid → name (the first name of a gid wins). */
export function parseGroup(text: string): Map<number, string> {
  const groups = new Map<number, string>();
  for (const g of parseGroups(text)) if (!groups.has(g.gid)) groups.set(g.gid, g.name);
  return groups;
}

function readOr(path: string, fallback: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return fallback;
  }
}

/**
 * The system's user database, read afresh on each lookup: users may be added inside a running
 * sandbox (useradd in a template build), and the files are small.
 */
export class UserDatabase {
  constructor(readonly root = '/etc') {}

  lookup(name: string): SystemUser {
    const user = parsePasswd(readOr(`${this.root}/passwd`, '')).find((u) => u.name === name);
    if (!user) throw unauthenticated(`invalid username: '${name}'`);
    return user;
  }

  byUid(uid: number): SystemUser {
    const user = parsePasswd(readOr(`${this.root}/passwd`, '')).find((u) => u.uid === uid);
    if (!user) throw notFound(`no user with uid ${uid}`);
    return user;
  }

  /** A group by name or `#gid`. */
  group(nameOrId: string): SystemGroup {
    const groups = parseGroups(readOr(`${this.root}/group`, ''));
    const byId = /^#\d+$/.test(nameOrId) ? Number(nameOrId.slice(1)) : undefined;
    const group = groups.find((g) => (byId !== undefined ? g.gid === byId : g.name === nameOrId));
    if (!group) throw notFound(`unknown group ${nameOrId}`);
    return group;
  }

  /** The groups `user` belongs to: its primary group and every group that lists it as a member. */
  groupsOf(user: SystemUser): SystemGroup[] {
    return parseGroups(readOr(`${this.root}/group`, '')).filter(
      (g) => g.gid === user.gid || g.members.includes(user.name),
    );
  }

  /** Owner and group names for stat results; unknown ids are shown as numbers, like ls does. */
  namer(): { user(uid: number): string; group(gid: number): string } {
    const users = new Map(parsePasswd(readOr(`${this.root}/passwd`, '')).map((u) => [u.uid, u.name]));
    const groups = parseGroup(readOr(`${this.root}/group`, ''));
    return {
      user: (uid) => users.get(uid) ?? String(uid),
      group: (gid) => groups.get(gid) ?? String(gid),
    };
  }
}
