import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialsFromAuthFile, defaultAuthFile, parseChallenges } from '../../src/auth.js';
import {
  MediaType,
  parseConfig,
  parseManifest,
  selectPlatform,
  type ImageIndex,
} from '../../src/manifest.js';
import { OciError } from '../../src/errors.js';

const d = (c: string) => `sha256:${c.repeat(64)}`;
const json = (v: unknown) => Buffer.from(JSON.stringify(v));

function code(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    return e instanceof OciError ? `${e.code}: ${e.message}` : `other: ${(e as Error).message}`;
  }
  return undefined;
}

describe('manifests', () => {
  const manifest = {
    schemaVersion: 2,
    mediaType: MediaType.dockerManifest,
    config: { mediaType: MediaType.dockerConfig, digest: d('c'), size: 10 },
    layers: [{ mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', digest: d('1'), size: 5 }],
  };

  it('parses Docker schema 2 and OCI manifests', () => {
    const m = parseManifest(json(manifest), undefined, 'x');
    expect(m).toMatchObject({
      kind: 'manifest',
      mediaType: MediaType.dockerManifest,
      config: { digest: d('c') },
    });
    const { mediaType: _, ...bare } = manifest;
    // no mediaType in the body: the Content-Type header decides, else the shape
    expect(parseManifest(json(bare), MediaType.dockerManifest, 'x').mediaType).toBe(MediaType.dockerManifest);
    expect(parseManifest(json(bare), 'application/json', 'x').mediaType).toBe(MediaType.ociManifest);
  });

  it('refuses schema 1, artifacts, unknown layer types, bad digests', () => {
    expect(
      code(() => parseManifest(json({ schemaVersion: 1, fsLayers: [] }), MediaType.dockerSchema1Signed, 'x')),
    ).toMatch(/^unsupported: .*schema 1/);
    const helm = {
      ...manifest,
      config: { ...manifest.config, mediaType: 'application/vnd.cncf.helm.config.v1+json' },
    };
    expect(code(() => parseManifest(json(helm), undefined, 'x'))).toMatch(
      /^unsupported: x is not a container image/,
    );
    const weird = { ...manifest, layers: [{ mediaType: 'application/x-foo', digest: d('1'), size: 1 }] };
    expect(code(() => parseManifest(json(weird), undefined, 'x'))).toMatch(
      /unsupported media type application\/x-foo/,
    );
    const badDigest = { ...manifest, layers: [{ ...manifest.layers[0], digest: 'sha256:zz' }] };
    expect(code(() => parseManifest(json(badDigest), undefined, 'x'))).toMatch(
      /^registry_error: .*malformed digest/,
    );
    expect(code(() => parseManifest(Buffer.from('{nope'), undefined, 'x'))).toMatch(/not valid JSON/);
  });

  const index = (entries: unknown[]): ImageIndex =>
    parseManifest(
      json({ schemaVersion: 2, mediaType: MediaType.ociIndex, manifests: entries }),
      undefined,
      'img',
    ) as ImageIndex;
  const entry = (c: string, platform?: object, extra: object = {}) => ({
    mediaType: MediaType.ociManifest,
    digest: d(c),
    size: 1,
    ...(platform ? { platform } : {}),
    ...extra,
  });

  it('selects the wanted platform, skipping attestations', () => {
    const idx = index([
      entry('1', { os: 'linux', architecture: 'arm64', variant: 'v8' }),
      entry(
        '2',
        { os: 'unknown', architecture: 'unknown' },
        { annotations: { 'vnd.docker.reference.type': 'attestation-manifest' } },
      ),
      entry('3', { os: 'linux', architecture: 'amd64' }),
    ]);
    expect(selectPlatform(idx, { os: 'linux', architecture: 'amd64' }, 'img').digest).toBe(d('3'));
    expect(selectPlatform(idx, { os: 'linux', architecture: 'arm64' }, 'img').digest).toBe(d('1'));
    expect(code(() => selectPlatform(idx, { os: 'linux', architecture: 's390x' }, 'img'))).toBe(
      'platform_mismatch: img has no image for linux/s390x; available platforms: linux/arm64/v8, linux/amd64',
    );
    // a lone entry without a platform is taken as is
    expect(selectPlatform(index([entry('4')]), { os: 'linux', architecture: 'amd64' }, 'img').digest).toBe(
      d('4'),
    );
  });

  it('reads the runtime config and diff ids', () => {
    const cfg = parseConfig(
      json({
        architecture: 'amd64',
        os: 'linux',
        config: {
          Env: ['A=1'],
          Cmd: ['bash'],
          Entrypoint: null,
          WorkingDir: '/testbed',
          User: 'app',
          ExposedPorts: { '8080/tcp': {} },
          Labels: { a: 'b', n: 1 },
        },
        rootfs: { type: 'layers', diff_ids: [d('a'), d('b')] },
      }),
      'x',
    );
    expect(cfg).toEqual({
      platform: { os: 'linux', architecture: 'amd64' },
      config: {
        env: ['A=1'],
        cmd: ['bash'],
        entrypoint: null,
        workingDir: '/testbed',
        user: 'app',
        exposedPorts: ['8080/tcp'],
        labels: { a: 'b' },
      },
      diffIds: [d('a'), d('b')],
    });
    expect(parseConfig(json({ rootfs: { type: 'layers', diff_ids: [] } }), 'x').config).toMatchObject({
      env: [],
      cmd: null,
      workingDir: '',
      user: '',
    });
    expect(code(() => parseConfig(json({ config: {} }), 'x'))).toMatch(/no rootfs.diff_ids/);
  });
});

describe('registry auth', () => {
  it('parses WWW-Authenticate challenges', () => {
    expect(
      parseChallenges(
        'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/ubuntu:pull,push"',
      ),
    ).toEqual([
      {
        scheme: 'bearer',
        params: {
          realm: 'https://auth.docker.io/token',
          service: 'registry.docker.io',
          scope: 'repository:library/ubuntu:pull,push',
        },
      },
    ]);
    expect(parseChallenges('Basic realm="Registry Realm"')).toEqual([
      { scheme: 'basic', params: { realm: 'Registry Realm' } },
    ]);
    expect(parseChallenges('Bearer realm=http://x/t, service=svc, Basic realm="a \\"q\\""')).toEqual([
      { scheme: 'bearer', params: { realm: 'http://x/t', service: 'svc' } },
      { scheme: 'basic', params: { realm: 'a "q"' } },
    ]);
    expect(parseChallenges('')).toEqual([]);
  });

  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'aenv-oci-auth-unit-'));
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  it('reads docker config.json auths', async () => {
    const file = join(dir, 'config.json');
    await writeFile(
      file,
      JSON.stringify({
        auths: {
          'https://index.docker.io/v1/': { auth: Buffer.from('hub:secret:with:colons').toString('base64') },
          'ghcr.io': { username: 'u', password: 'p' },
          'http://127.0.0.1:5000': { identitytoken: 'refresh-me' },
          'empty.io': {},
        },
        credsStore: 'desktop',
      }),
    );
    expect(await credentialsFromAuthFile(file, 'docker.io')).toEqual({
      username: 'hub',
      password: 'secret:with:colons',
    });
    expect(await credentialsFromAuthFile(file, 'ghcr.io')).toEqual({ username: 'u', password: 'p' });
    expect(await credentialsFromAuthFile(file, '127.0.0.1:5000')).toEqual({ identityToken: 'refresh-me' });
    expect(await credentialsFromAuthFile(file, 'empty.io')).toBeUndefined();
    expect(await credentialsFromAuthFile(file, 'quay.io')).toBeUndefined();
    expect(await credentialsFromAuthFile(join(dir, 'missing.json'), 'quay.io')).toBeUndefined();
    await writeFile(join(dir, 'bad.json'), '{');
    await expect(credentialsFromAuthFile(join(dir, 'bad.json'), 'x')).rejects.toThrow(
      /cannot read registry credentials/,
    );
    expect(defaultAuthFile({ DOCKER_CONFIG: '/etc/d' })).toBe('/etc/d/config.json');
  });
});
