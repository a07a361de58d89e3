import { OciError } from './errors.js';

/** An OCI platform: `linux/amd64`, `linux/arm64/v8`, … */
export interface Platform {
  readonly os: string;
  readonly architecture: string;
  readonly variant?: string;
}

const NODE_ARCH: Record<string, string> = {
  x64: 'amd64',
  arm64: 'arm64',
  arm: 'arm',
  ia32: '386',
  ppc64: 'ppc64le',
  s390x: 's390x',
  riscv64: 'riscv64',
  loong64: 'loong64',
  mips64el: 'mips64le',
};
const ARCH_ALIASES: Record<string, string> = {
  x86_64: 'amd64',
  'x86-64': 'amd64',
  aarch64: 'arm64',
  i386: '386',
};

/** The platform sandboxes on this host run: linux and the CPU architecture Node was built for. */
export function hostPlatform(arch: string = process.arch): Platform {
  const architecture = NODE_ARCH[arch] ?? arch;
  return architecture === 'arm'
    ? { os: 'linux', architecture, variant: 'v7' }
    : { os: 'linux', architecture };
}

/** `linux/amd64`, `linux/arm64/v8`, `arm64` (os defaults to linux). */
export function parsePlatform(s: string): Platform {
  const parts = s.trim().toLowerCase().split('/');
  if (parts.length === 1) parts.unshift('linux');
  const [os, arch, variant, ...extra] = parts;
  if (!os || !arch || extra.length > 0 || (variant !== undefined && !variant)) {
    throw new OciError('bad_reference', `invalid platform "${s}" (expected os/arch[/variant])`);
  }
  const architecture = ARCH_ALIASES[arch] ?? arch;
  return variant ? { os, architecture, variant } : { os, architecture };
}

export function formatPlatform(p: Platform): string {
  return [p.os, p.architecture, p.variant].filter(Boolean).join('/');
}

/** Variant with the architecture's implied default filled in (arm64 → v8). */
function variantOf(p: Platform): string | undefined {
  if (p.variant) return p.variant;
  if (p.architecture === 'arm64') return 'v8';
  return undefined;
}

/** Whether an image built for `candidate` runs on `wanted` (an unspecified wanted variant accepts any). */
export function platformMatches(wanted: Platform, candidate: Platform): boolean {
  if (wanted.os !== candidate.os) return false;
  if (wanted.architecture !== (ARCH_ALIASES[candidate.architecture] ?? candidate.architecture)) return false;
  if (!wanted.variant) return true;
  return variantOf(wanted) === variantOf(candidate);
}
