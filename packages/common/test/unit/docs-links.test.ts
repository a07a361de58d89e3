import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The repository's documentation: every relative link (and `#anchor` into a markdown file) must
// lead somewhere, and the README stays a short entry point whose details live in docs/.

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
const README_MAX_LINES = 250;

function markdownFiles(): string[] {
  const docs = readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`);
  const packages = readdirSync(path.join(ROOT, 'packages'))
    .map((p) => `packages/${p}/README.md`)
    .filter((f) => existsSync(path.join(ROOT, f)));
  return ['README.md', 'CONTRIBUTING.md', ...docs, ...packages];
}

/** The text outside fenced code blocks and inline code spans, where links and headings are. */
function prose(markdown: string): string[] {
  let fenced = false;
  const lines: string[] = [];
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    else lines.push(fenced ? '' : line.replace(/`[^`]*`/g, (code) => code.replaceAll(/[[\]()]/g, '')));
  }
  return lines;
}

/** GitHub's heading ids: the rendered text lower-cased, punctuation dropped, spaces as dashes, repeats numbered. */
function headingSlugs(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const slugs = new Set<string>();
  for (const line of prose(markdown)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const base = heading[1]
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    slugs.add(n === 0 ? base : `${base}-${n}`);
  }
  return slugs;
}

function relativeLinks(markdown: string): string[] {
  const targets: string[] = [];
  for (const line of prose(markdown)) {
    for (const m of line.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      if (!/^[a-z][a-z0-9+.-]*:/i.test(m[1])) targets.push(m[1]);
    }
  }
  return targets;
}

/** What is wrong with one link of `file` (a path from the repository root), or undefined. */
function brokenLink(file: string, link: string): string | undefined {
  const [target, anchor] = link.split('#', 2) as [string, string | undefined];
  const resolved =
    target === '' ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), target));
  if (!existsSync(path.join(ROOT, resolved))) return `${file}: ${link} (no ${resolved})`;
  if (anchor === undefined || !resolved.endsWith('.md')) return undefined;
  const slugs = headingSlugs(readFileSync(path.join(ROOT, resolved), 'utf8'));
  return slugs.has(decodeURIComponent(anchor))
    ? undefined
    : `${file}: ${link} (no heading #${anchor} in ${resolved})`;
}

describe('documentation links', () => {
  it('slugs headings as GitHub does', () => {
    const slugs = headingSlugs(
      '# AgentENV\n## What runs where\n### Lifecycle (`bench/lifecycle.ts`)\n### 1. Installer + systemd (Debian 12, Ubuntu 24.04)\n' +
        '## Gateway (`aenv-gateway`, `packages/gateway`)\n## P2P\n## P2P\n```sh\n# not a heading\n```\n',
    );
    expect([...slugs]).toEqual([
      'agentenv',
      'what-runs-where',
      'lifecycle-benchlifecyclets',
      '1-installer--systemd-debian-12-ubuntu-2404',
      'gateway-aenv-gateway-packagesgateway',
      'p2p',
      'p2p-1',
    ]);
  });

  it('every relative link and anchor in the README, CONTRIBUTING.md and docs/ resolves', () => {
    const broken = markdownFiles().flatMap((file) =>
      relativeLinks(readFileSync(path.join(ROOT, file), 'utf8'))
        .map((link) => brokenLink(file, link))
        .filter((problem) => problem !== undefined),
    );
    expect(broken).toEqual([]);
  });

  it(`the README is at most ${README_MAX_LINES} lines`, () => {
    const lines = readFileSync(path.join(ROOT, 'README.md'), 'utf8').trimEnd().split('\n').length;
    expect(lines).toBeLessThanOrEqual(README_MAX_LINES);
  });
});
