import { describe, expect, it } from 'vitest';
import { OciError } from '../../src/errors.js';
import {
  formatReference,
  isLoopbackRegistry,
  parseReference,
  registryEndpoint,
} from '../../src/reference.js';
import { formatPlatform, hostPlatform, parsePlatform, platformMatches } from '../../src/platform.js';

const D = `sha256:${'a1'.repeat(32)}`;

describe('image references', () => {
  it.each([
    ['busybox', { registry: 'docker.io', repository: 'library/busybox', tag: 'latest' }],
    ['ubuntu:22.04', { registry: 'docker.io', repository: 'library/ubuntu', tag: '22.04' }],
    [
      'swebench/sweb.eval.x86_64.django_1776_django-11099:latest',
      {
        registry: 'docker.io',
        repository: 'swebench/sweb.eval.x86_64.django_1776_django-11099',
        tag: 'latest',
      },
    ],
    ['docker.io/library/alpine', { registry: 'docker.io', repository: 'library/alpine', tag: 'latest' }],
    ['index.docker.io/alpine:3', { registry: 'docker.io', repository: 'library/alpine', tag: '3' }],
    ['ghcr.io/org/team/img:v1.2', { registry: 'ghcr.io', repository: 'org/team/img', tag: 'v1.2' }],
    ['localhost/img', { registry: 'localhost', repository: 'img', tag: 'latest' }],
    ['127.0.0.1:5000/test/busybox:1', { registry: '127.0.0.1:5000', repository: 'test/busybox', tag: '1' }],
    ['[::1]:5000/a', { registry: '[::1]:5000', repository: 'a', tag: 'latest' }],
    [`quay.io/a/b@${D}`, { registry: 'quay.io', repository: 'a/b', digest: D }],
    [`a/b:t@${D}`, { registry: 'docker.io', repository: 'a/b', tag: 't', digest: D }],
    ['Registry.Example.com:443/x', { registry: 'registry.example.com:443', repository: 'x', tag: 'latest' }],
    ['a__b/c-d.e---f', { registry: 'docker.io', repository: 'a__b/c-d.e---f', tag: 'latest' }],
    // as in Docker: an upper-case first component can only be a registry host
    ['MyHost/img', { registry: 'myhost', repository: 'img', tag: 'latest' }],
  ])('%s', (input, expected) => {
    expect(parseReference(input)).toEqual(expected);
  });

  it.each([
    ['', /empty/],
    ['Busybox', /must be lower-case/],
    ['docker.io/Library/x', /must be lower-case/],
    ['a/b:', /malformed tag/],
    ['a/b:-bad', /malformed tag/],
    ['a//b', /malformed repository component/],
    ['a/b@sha256:1234', /malformed digest/],
    [`a/b@sha512:${'ab'.repeat(64)}`, /algorithm sha512 is not supported/],
    ['host:99999/x', /malformed registry/],
    ['a/-b', /malformed repository component/],
    [':tag', /no repository name/],
  ])('refuses %j', (input, message) => {
    let err: unknown;
    try {
      parseReference(input);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(OciError);
    expect((err as OciError).code).toBe('bad_reference');
    expect((err as Error).message).toMatch(message);
  });

  it('formats the canonical form and finds the API endpoint', () => {
    expect(formatReference(parseReference('busybox'))).toBe('docker.io/library/busybox:latest');
    expect(formatReference(parseReference(`h:1/a@${D}`))).toBe(`h:1/a@${D}`);
    expect(registryEndpoint('docker.io')).toBe('registry-1.docker.io');
    expect(registryEndpoint('ghcr.io')).toBe('ghcr.io');
  });

  it('treats loopback registries as plain HTTP', () => {
    expect(isLoopbackRegistry('127.0.0.1:5000')).toBe(true);
    expect(isLoopbackRegistry('127.1.2.3')).toBe(true);
    expect(isLoopbackRegistry('localhost:80')).toBe(true);
    expect(isLoopbackRegistry('[::1]:5000')).toBe(true);
    expect(isLoopbackRegistry('docker.io')).toBe(false);
    expect(isLoopbackRegistry('127.example.com')).toBe(false);
  });
});

describe('platforms', () => {
  it('maps the host architecture', () => {
    expect(hostPlatform('x64')).toEqual({ os: 'linux', architecture: 'amd64' });
    expect(hostPlatform('arm64')).toEqual({ os: 'linux', architecture: 'arm64' });
    expect(hostPlatform('arm')).toEqual({ os: 'linux', architecture: 'arm', variant: 'v7' });
  });

  it('parses and formats', () => {
    expect(parsePlatform('linux/amd64')).toEqual({ os: 'linux', architecture: 'amd64' });
    expect(parsePlatform('arm64')).toEqual({ os: 'linux', architecture: 'arm64' });
    expect(parsePlatform('linux/aarch64/v8')).toEqual({ os: 'linux', architecture: 'arm64', variant: 'v8' });
    expect(parsePlatform('linux/x86_64')).toEqual({ os: 'linux', architecture: 'amd64' });
    expect(() => parsePlatform('linux/arm64/v8/x')).toThrow(/invalid platform/);
    expect(formatPlatform({ os: 'linux', architecture: 'arm', variant: 'v6' })).toBe('linux/arm/v6');
  });

  it('matches variants the way registries label them', () => {
    const arm64 = { os: 'linux', architecture: 'arm64' };
    expect(platformMatches(arm64, { ...arm64, variant: 'v8' })).toBe(true);
    expect(platformMatches({ ...arm64, variant: 'v8' }, arm64)).toBe(true);
    expect(
      platformMatches(
        { os: 'linux', architecture: 'arm', variant: 'v7' },
        { os: 'linux', architecture: 'arm', variant: 'v6' },
      ),
    ).toBe(false);
    expect(
      platformMatches({ os: 'linux', architecture: 'amd64' }, { os: 'windows', architecture: 'amd64' }),
    ).toBe(false);
    expect(
      platformMatches({ os: 'linux', architecture: 'amd64' }, { os: 'linux', architecture: 'x86_64' }),
    ).toBe(true);
  });
});
