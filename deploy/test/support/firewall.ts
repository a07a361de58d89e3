import { mustRun } from './run.js';

/**
 * The host's iptables rules without comments and counters, for before/after comparisons. Rules of
 * AgentENV nodes (AENV-* chains, ae-* veths) other than the ones the test is about may come and go
 * on a shared machine; they are left out unless they carry one of `keepTags`.
 */
export async function firewallRules(keepTags: readonly string[] = []): Promise<string[]> {
  const dump = await mustRun('iptables-save', []);
  const mine = (line: string) =>
    keepTags.some((t) => line.includes(`AENV-${t}-`) || line.includes(`ae-${t}-`));
  return dump
    .split('\n')
    .filter((line) => line && !line.startsWith('#'))
    .map((line) => line.replace(/\[\d+:\d+\]/, ''))
    .filter((line) => mine(line) || !/AENV-|ae-[a-z0-9]+-\+/.test(line));
}
