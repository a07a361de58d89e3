import { describe, expect, it } from 'vitest';
import { DEFAULT_ALWAYS_DENIED, resolveNetworkConfig } from '../../src/network/config.js';
import { NetworkError } from '../../src/network/errors.js';

function configError(options: Parameters<typeof resolveNetworkConfig>[0]): NetworkError {
  try {
    resolveNetworkConfig(options);
  } catch (error) {
    expect(error).toBeInstanceOf(NetworkError);
    return error as NetworkError;
  }
  throw new Error('expected a NetworkError');
}

describe('resolveNetworkConfig', () => {
  it('has working defaults', () => {
    const config = resolveNetworkConfig();
    expect(config.nodeTag).toBe('n0');
    expect(config.sandboxAddress).toBe('10.0.2.2');
    expect(config.sandboxGateway).toBe('10.0.2.1');
    expect(config.alwaysDeniedCidrs).toEqual([...DEFAULT_ALWAYS_DENIED]);
    expect(config.defaultEgress).toEqual({ allowInternet: true, allowOut: [], denyOut: [] });
    expect(config.poolSize).toBe(4);
    // 10.201.0.0/16 holds 32768 /31s; "ae-n0-" leaves 9 digits for the index.
    expect(config.capacity).toBe(32768);
  });

  it('caps capacity by the interface-name length', () => {
    expect(resolveNetworkConfig({ nodeTag: 'abcdef', hostRange: '100.64.0.0/10' }).capacity).toBe(100_000);
  });

  it('rejects bad tags and ranges', () => {
    expect(configError({ nodeTag: 'N0' }).code).toBe('INVALID_CONFIG');
    expect(configError({ nodeTag: 'a-b' }).code).toBe('INVALID_CONFIG');
    expect(configError({ nodeTag: 'abcdefg' }).code).toBe('INVALID_CONFIG');
    expect(configError({ hostRange: '10.201.0.0' }).message).toContain('hostRange');
    expect(configError({ hostRange: '10.201.0.0/31' }).message).toContain('/30');
    expect(configError({ hostRange: '10.0.0.0/8' }).message).toContain('overlaps');
  });

  it('rejects an inconsistent sandbox subnet', () => {
    expect(configError({ sandboxGateway: '10.0.3.1' }).message).toContain('outside');
    expect(configError({ sandboxGateway: '10.0.2.2' }).message).toContain('differ');
    expect(configError({ sandboxAddress: '10.0.2.255' }).message).toContain('broadcast');
    expect(configError({ sandboxAddress: '10.0.2.0', sandboxGateway: '10.0.2.1' }).message).toContain(
      'network',
    );
    expect(configError({ sandboxPrefixLength: 31 }).message).toContain('sandboxPrefixLength');
  });

  it('rejects bad always-denied entries, pool sizes and default egress', () => {
    expect(configError({ alwaysDenied: ['10.0.0.0/8', 'internal.corp'] }).message).toContain('internal.corp');
    expect(configError({ poolSize: -1 }).message).toContain('poolSize');
    expect(configError({ poolSize: 1.5 }).message).toContain('poolSize');
    expect(
      configError({ defaultEgress: { allowInternet: true, allowOut: ['x.example'], denyOut: [] } }).code,
    ).toBe('DOMAIN_NOT_SUPPORTED');
  });
});
