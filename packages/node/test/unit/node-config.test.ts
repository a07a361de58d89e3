import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseListenAddress } from '../../src/config/load.js';
import { createDriver } from '../../src/wiring/index.js';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

function file(text: string): string {
  const d = mkdtempSync(path.join(tmpdir(), 'aenv-config-'));
  dirs.push(d);
  writeFileSync(path.join(d, 'config.toml'), text);
  return path.join(d, 'config.toml');
}

describe('node configuration', () => {
  it('has defaults that need no file', () => {
    const c = loadConfig({ HOSTNAME: 'h1' });
    expect(c.apiAddr).toBe('127.0.0.1:8000');
    expect(c.orchestrator.defaultSandboxTimeoutSecs).toBe(300);
    expect(c.fork.maxChildren).toBe(16);
    expect(c.network.alwaysDeniedCidrs).toContain('169.254.0.0/16');
    expect(c.nodeIdentity.nodeId).toBe('h1');
    expect(c.runtime.mergePages).toBe(false);
  });

  it('turns page merging on from the file or AENV_MERGE_PAGES', () => {
    expect(loadConfig({ AENV_CONFIG_PATH: file('[runtime]\nmerge_pages = true\n') }).runtime.mergePages).toBe(
      true,
    );
    expect(loadConfig({ AENV_MERGE_PAGES: '1' }).runtime.mergePages).toBe(true);
    expect(loadConfig({ AENV_MERGE_PAGES: 'off' }).runtime.mergePages).toBe(false);
  });

  it('layers the TOML file (snake_case) under environment variables', () => {
    const f = file(`
api_addr = "0.0.0.0:9000"
virtualization_mode = "pvm"
[fork]
max_children = 4
[sandbox_proxy]
domains = ["a.example"]
`);
    const c = loadConfig({ AENV_CONFIG_PATH: f, API_ADDR: '127.0.0.1:7000', AENV_HOME_PATH: '/srv/aenv' });
    expect(c.apiAddr).toBe('127.0.0.1:7000');
    expect(c.homePath).toBe('/srv/aenv');
    expect(c.fork.maxChildren).toBe(4);
    expect(c.runtime.virtualizationMode).toBe('pvm');
    expect(c.sandboxProxy.domains).toEqual(['a.example']);
    expect(
      loadConfig({ AENV_CONFIG_PATH: f, AENV_SANDBOX_PROXY_DOMAINS: 'x.test, y.test' }).sandboxProxy.domains,
    ).toEqual(['x.test', 'y.test']);
  });

  it('bounds event streams from [streams] and the environment', () => {
    expect(loadConfig({}).streams).toEqual({ maxOpen: 256, maxPerKey: 32, maxBufferedKb: 1024 });
    const c = loadConfig({
      AENV_CONFIG_PATH: file('[streams]\nmax_open = 10\nmax_per_key = 2'),
      AENV_STREAM_BUFFER_KB: '64',
    });
    expect(c.streams).toEqual({ maxOpen: 10, maxPerKey: 2, maxBufferedKb: 64 });
    expect(() => loadConfig({ AENV_MAX_STREAMS_PER_KEY: '0' })).toThrow(ConfigError);
  });

  it('names what is wrong', () => {
    expect(() => loadConfig({ AENV_CONFIG_PATH: '/nonexistent/aenv.toml' })).toThrow(
      /cannot read config file/,
    );
    expect(() => loadConfig({ AENV_CONFIG_PATH: file('api_addr = ') })).toThrow(ConfigError);
    expect(() => loadConfig({ AENV_CONFIG_PATH: file('[fork]\nmax_children = 0') })).toThrow(
      /fork\/maxChildren/,
    );
    expect(() => loadConfig({ AENV_RUNTIME: 'docker' })).toThrow(/runtime\/driver/);
    expect(() => loadConfig({ API_ADDR: 'nope' })).toThrow(/listen address/);
    expect(() => loadConfig({ AENV_SCHEDULER_URL: 'http://a:9090,b:9091' })).toThrow(
      /AENV_SCHEDULER_URL.*not an http\(s\) URL: b:9091/,
    );
    const replicas = loadConfig({ AENV_SCHEDULER_URL: 'http://a:9090,http://b:9091' });
    expect(replicas.cluster.schedulerUrl).toBe('http://a:9090,http://b:9091');
  });

  it('reads the API key from AENV_API_KEY_FILE (a mounted secret); AENV_API_KEY wins', () => {
    const key = file(`e2b_${'0f'.repeat(20)}\n`);
    expect(loadConfig({ AENV_API_KEY_FILE: key }).apiKey).toBe(`e2b_${'0f'.repeat(20)}`);
    expect(loadConfig({ AENV_API_KEY_FILE: key, AENV_API_KEY: 'e2b_direct' }).apiKey).toBe('e2b_direct');
    expect(() => loadConfig({ AENV_API_KEY_FILE: '/nonexistent/api-key' })).toThrow(
      /cannot read AENV_API_KEY_FILE \/nonexistent\/api-key/,
    );
    expect(() => loadConfig({ AENV_API_KEY_FILE: file('short\n') })).toThrow(/apiKey/);
    // Not a generated key instead of the operator's: the node refuses to start.
    expect(() => loadConfig({ AENV_API_KEY_FILE: file(' \n') })).toThrow(/AENV_API_KEY_FILE .* is empty/);
  });

  it('parses listen addresses', () => {
    expect(parseListenAddress('127.0.0.1:8000')).toEqual({ host: '127.0.0.1', port: 8000 });
    expect(parseListenAddress('[::1]:80')).toEqual({ host: '::1', port: 80 });
    expect(() => parseListenAddress('host:99999')).toThrow();
  });
});

describe('runtime driver from the configuration', () => {
  const at = { runtimePath: '/run/aenv-test-config', nodeTag: 'cfg' };

  it('builds the gVisor driver for `gvisor`', () => {
    const driver = createDriver(loadConfig({}).runtime, at);
    expect(driver.name).toBe('gvisor');
  });

  it('refuses `firecracker` with a message saying why and what to use', () => {
    const config = loadConfig({ AENV_RUNTIME: 'firecracker', AENV_VIRTUALIZATION_MODE: 'pvm' });
    expect(config.runtime).toEqual({ driver: 'firecracker', virtualizationMode: 'pvm', mergePages: false });
    expect(() => createDriver(config.runtime, at)).toThrow(ConfigError);
    expect(() => createDriver(config.runtime, at)).toThrow(/no Firecracker driver yet; use "gvisor"/);
  });
});
