import { describe, expect, it } from 'vitest';
import { TEST_CLUSTER_LAYOUT, TestCluster } from '@agentenv/test-support/cluster';
import { ClusterLauncher, logDir, snapshotStore } from '@agentenv/test-support/launcher';

describe("the test cluster's layout", () => {
  it('places every part where the suites look for it', () => {
    const c = new ClusterLauncher(TEST_CLUSTER_LAYOUT, { replicas: 2, store: 'redis' });
    expect(c.gatewayUrls).toEqual(['http://127.0.0.1:19900', 'http://127.0.0.1:19903']);
    expect(c.schedulerUrls).toEqual(['http://127.0.0.1:19901', 'http://127.0.0.1:19905']);
    expect(c.schedulerList).toBe('http://127.0.0.1:19901,http://127.0.0.1:19905');
    expect(c.store).toBe('redis://127.0.0.1:19902');
    expect(logDir(TEST_CLUSTER_LAYOUT)).toBe('/var/lib/aenv-h9/logs');
    expect(snapshotStore(TEST_CLUSTER_LAYOUT)).toBe('/var/lib/aenv-h9/snapshot-store');
  });

  it('gives node k its own port, home, tag and host range, and the id TestCluster names it by', () => {
    expect(TEST_CLUSTER_LAYOUT.node(2)).toEqual({
      name: 'node-n2',
      id: 'h9n2',
      addr: '127.0.0.1:19912',
      home: '/var/lib/aenv-h9/n2',
      runtimeDir: '/run/aenv-h9',
      tag: 'h9n2',
      hostRange: '10.119.64.0/19',
    });
    expect(TestCluster.nodeId(2)).toBe('h9n2');
    expect(new ClusterLauncher(TEST_CLUSTER_LAYOUT, { replicas: 1, store: 'memory' }).store).toBe('memory');
  });

  it('has room for two replicas', () => {
    expect(() => new ClusterLauncher(TEST_CLUSTER_LAYOUT, { replicas: 3, store: 'redis' })).toThrow(
      'replicas must be 1 to 2',
    );
  });
});
