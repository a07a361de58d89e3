import { OciError } from './errors.js';

/** A parsed image reference `[registry/]repository[:tag][@sha256:…]`, Docker's defaults applied. */
export interface ImageReference {
  /** `docker.io` for Docker Hub, else `host[:port]` as written (lower-cased). */
  readonly registry: string;
  /** Path inside the registry, `library/` added for official Docker Hub images. */
  readonly repository: string;
  /** Absent when only a digest was given; `latest` when neither was. */
  readonly tag?: string;
  /** `sha256:<64 hex>`; when present it wins over the tag. */
  readonly digest?: string;
}

export const DOCKER_HUB = 'docker.io';
/** Where Docker Hub's registry API actually lives. */
export const DOCKER_HUB_ENDPOINT = 'registry-1.docker.io';
const DOCKER_HUB_ALIASES = new Set([
  'docker.io',
  'index.docker.io',
  'registry-1.docker.io',
  'registry.hub.docker.com',
]);

const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const TAG = /^[\w][\w.-]{0,127}$/;
const DIGEST = /^sha256:[a-f0-9]{64}$/;
const ANY_DIGEST = /^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$/;
const DOMAIN_COMPONENT = /^(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])$/;

function bad(input: string, why: string): never {
  throw new OciError('bad_reference', `invalid image reference "${input}": ${why}`);
}

function validRegistry(host: string): boolean {
  let name = host;
  let port: string | undefined;
  if (host.startsWith('[')) {
    const end = host.indexOf(']');
    if (end < 0) return false;
    if (!/^[0-9a-fA-F:.]+$/.test(host.slice(1, end))) return false;
    const rest = host.slice(end + 1);
    if (rest && !/^:\d{1,5}$/.test(rest)) return false;
    return true;
  }
  const colon = host.lastIndexOf(':');
  if (colon >= 0) {
    port = host.slice(colon + 1);
    name = host.slice(0, colon);
    if (!/^\d{1,5}$/.test(port) || Number(port) > 65535) return false;
  }
  return name.split('.').every((c) => DOMAIN_COMPONENT.test(c));
}

/**
 * Parses an image reference the way `docker pull` does: the first path component is a registry
 * when it contains `.` or `:` or is `localhost`; otherwise the image is on Docker Hub, where a
 * single-component name gets the `library/` prefix. Without tag or digest the tag is `latest`.
 */
export function parseReference(input: string): ImageReference {
  const s = input.trim();
  if (!s) bad(input, 'empty');
  if (s.length > 512) bad(input, 'too long');
  let rest = s;
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) {
      if (ANY_DIGEST.test(digest) && !digest.startsWith('sha256:')) {
        bad(input, `digest algorithm ${digest.split(':')[0]} is not supported (only sha256)`);
      }
      bad(input, `malformed digest "${digest}" (expected sha256:<64 hex digits>)`);
    }
  }
  let tag: string | undefined;
  const slash = rest.lastIndexOf('/');
  const colon = rest.lastIndexOf(':');
  if (colon > slash) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG.test(tag)) bad(input, `malformed tag "${tag}"`);
  }
  if (!rest) bad(input, 'no repository name');

  let registry = DOCKER_HUB;
  let repository = rest;
  const first = rest.indexOf('/');
  if (first >= 0) {
    const head = rest.slice(0, first);
    if (head.includes('.') || head.includes(':') || head === 'localhost' || head !== head.toLowerCase()) {
      if (!validRegistry(head)) bad(input, `malformed registry "${head}"`);
      registry = head.toLowerCase();
      repository = rest.slice(first + 1);
    }
  }
  if (DOCKER_HUB_ALIASES.has(registry)) {
    registry = DOCKER_HUB;
    if (!repository.includes('/')) repository = `library/${repository}`;
  }
  if (!repository) bad(input, 'no repository name');
  for (const c of repository.split('/')) {
    if (!PATH_COMPONENT.test(c)) {
      bad(
        input,
        c !== c.toLowerCase()
          ? `repository "${repository}" must be lower-case`
          : `malformed repository component "${c}"`,
      );
    }
  }
  if (registry.length + 1 + repository.length > 255) bad(input, 'name longer than 255 characters');
  if (!tag && !digest) tag = 'latest';
  return { registry, repository, ...(tag ? { tag } : {}), ...(digest ? { digest } : {}) };
}

/** The canonical, fully qualified form: `docker.io/library/ubuntu:22.04`, `host:5000/a/b@sha256:…`. */
export function formatReference(ref: ImageReference): string {
  let s = `${ref.registry}/${ref.repository}`;
  if (ref.tag) s += `:${ref.tag}`;
  if (ref.digest) s += `@${ref.digest}`;
  return s;
}

/** host[:port] the registry API is served from (Docker Hub's API is not on docker.io). */
export function registryEndpoint(registry: string): string {
  return registry === DOCKER_HUB ? DOCKER_HUB_ENDPOINT : registry;
}

/** Registries on the loopback interface are spoken to over plain HTTP, as Docker does. */
export function isLoopbackRegistry(registry: string): boolean {
  const host = registry.startsWith('[')
    ? registry.slice(1, registry.indexOf(']'))
    : registry.replace(/:\d+$/, '');
  return host === 'localhost' || /^127\.\d+\.\d+\.\d+$/.test(host) || host === '::1';
}
