import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as apps from 'kubernetes-models/apps/v1';
import * as policy from 'kubernetes-models/policy/v1';
import * as rbac from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import * as core from 'kubernetes-models/v1';
import { parseAllDocuments } from 'yaml';
import { REPO } from '../support/release.js';
import { run } from '../support/run.js';

/**
 * The kustomize overlays rendered with kubectl (offline) and every object validated against the
 * Kubernetes API schema bundled in kubernetes-models. No cluster runs here: this proves the
 * manifests are well-formed and say what they must, not that a cluster accepts them.
 */
const KUBECTL = '/usr/bin/kubectl';
const hasKubectl = (await run('sh', ['-c', `command -v ${KUBECTL}`])).code === 0;
if (!hasKubectl)
  console.warn(`deploy/test/e2e/k8s.test.ts skipped: no ${KUBECTL} to render the overlays with`);
const API_KEY = `e2b_${'ab'.repeat(20)}`;

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
  [key: string]: unknown;
}
type Container = {
  name: string;
  image: string;
  command?: string[];
  env?: { name: string; value?: string; valueFrom?: Record<string, Record<string, string>> }[];
  envFrom?: { configMapRef?: { name: string } }[];
  ports?: { name: string; containerPort: number }[];
  securityContext?: { privileged?: boolean };
  lifecycle?: { preStop?: { exec?: { command: string[] } } };
  startupProbe?: { httpGet?: { path: string; port: string } };
  readinessProbe?: { httpGet?: { path: string; port: string } };
  livenessProbe?: { httpGet?: { path: string; port: string } };
  resources?: { requests?: Record<string, string> };
  volumeMounts?: { name: string; mountPath: string }[];
};
type PodSpec = {
  containers: Container[];
  terminationGracePeriodSeconds?: number;
  volumes?: { name: string; hostPath?: { path: string }; persistentVolumeClaim?: { claimName: string } }[];
};

type Model = new (o: unknown) => { validate(): void };
const MODELS: Record<string, Record<string, unknown>> = {
  v1: core,
  'apps/v1': apps,
  'policy/v1': policy,
  'rbac.authorization.k8s.io/v1': rbac,
};

function validate(obj: K8sObject): void {
  const Model = MODELS[obj.apiVersion]?.[obj.kind] as Model | undefined;
  if (!Model) throw new Error(`no schema here for ${obj.apiVersion} ${obj.kind}`);
  new Model(obj).validate();
}

async function render(overlay: string, dir: string): Promise<K8sObject[]> {
  const r = await run(KUBECTL, ['kustomize', path.join(dir, 'overlays', overlay)]);
  if (r.code !== 0) throw new Error(`kubectl kustomize ${overlay} failed:\n${r.stderr}`);
  return parseAllDocuments(r.stdout).map((d) => d.toJS() as K8sObject);
}

describe.skipIf(!hasKubectl)('Kubernetes manifests (kustomize, offline)', () => {
  let dir = '';
  const rendered: Record<string, K8sObject[]> = {};

  beforeAll(async () => {
    // The overlays read the operator's api-key.env, kept out of git: a copy gets one.
    dir = mkdtempSync(path.join(tmpdir(), 'aenv-k8s-'));
    cpSync(path.join(REPO, 'deploy', 'k8s'), dir, { recursive: true });
    for (const overlay of ['default', 'local']) {
      writeFileSync(path.join(dir, 'overlays', overlay, 'api-key.env'), `AENV_API_KEY=${API_KEY}\n`);
      rendered[overlay] = await render(overlay, dir);
    }
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const find = (overlay: string, kind: string, name: string): K8sObject => {
    const obj = rendered[overlay]!.find((o) => o.kind === kind && o.metadata.name.startsWith(name));
    if (!obj) throw new Error(`${overlay} renders no ${kind} ${name}`);
    return obj;
  };
  const pod = (obj: K8sObject) => (obj.spec as { template: { spec: PodSpec } }).template.spec;

  it.each(['default', 'local'])(
    '%s: every object validates against the Kubernetes API schema',
    async (overlay) => {
      const objects = rendered[overlay]!;
      expect(objects.length).toBeGreaterThan(10);
      for (const obj of objects) validate(obj);
      for (const obj of objects) if (obj.kind !== 'Namespace') expect(obj.metadata.namespace).toBe('aenv');
    },
  );

  it('the schema check catches a wrong type (so a pass means something)', () => {
    const broken = structuredClone(find('default', 'DaemonSet', 'aenv-node'));
    pod(broken).containers[0]!.ports = [{ name: 'http', containerPort: '8000' as unknown as number }];
    expect(() => validate(broken)).toThrow(/containerPort must be integer/);
  });

  it('the node DaemonSet: privileged, probes on /health, a preStop that drains, a long grace period', () => {
    const spec = pod(find('default', 'DaemonSet', 'aenv-node'));
    const node = spec.containers[0]!;
    expect(node.securityContext?.privileged).toBe(true);
    expect(node.image).toBe('aenv/node:0.1.0');
    for (const probe of [node.startupProbe, node.readinessProbe, node.livenessProbe]) {
      expect(probe?.httpGet).toEqual({ path: '/health', port: 'http' });
    }
    expect(node.ports).toEqual([{ name: 'http', containerPort: 8000 }]);
    expect(node.lifecycle?.preStop?.exec?.command.join(' ')).toMatch(/kill -TERM 1; while kill -0 1/);
    expect(spec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(600);
    const hostPaths = Object.fromEntries((spec.volumes ?? []).map((v) => [v.name, v.hostPath?.path]));
    const mounts = Object.fromEntries((node.volumeMounts ?? []).map((m) => [m.mountPath, hostPaths[m.name]]));
    expect(mounts['/var/lib/aenv']).toBe('/var/lib/aenv');
    expect(mounts['/dev']).toBe('/dev');
    expect(node.resources?.requests).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
    const env = Object.fromEntries((node.env ?? []).map((e) => [e.name, e]));
    expect(env.AENV_NODE_ID?.valueFrom).toEqual({ fieldRef: { fieldPath: 'spec.nodeName' } });
    expect(env.AENV_ADVERTISE_URL?.value).toBe('http://$(POD_IP):8000');
  });

  it('every container takes the API key from the generated Secret and the scheduler URL from the config', () => {
    const secret = find('default', 'Secret', 'aenv-api-key');
    expect(Buffer.from(secret.data!.AENV_API_KEY!, 'base64').toString()).toBe(API_KEY);
    const config = find('default', 'ConfigMap', 'aenv-config');
    expect(config.data!.AENV_SCHEDULER_URL).toBe('http://aenv-scheduler:9090');
    for (const [kind, name] of [
      ['DaemonSet', 'aenv-node'],
      ['Deployment', 'aenv-scheduler'],
      ['Deployment', 'aenv-gateway'],
    ] as const) {
      const c = pod(find('default', kind, name)).containers[0]!;
      const key = c.env?.find((e) => e.name === 'AENV_API_KEY');
      expect(key?.valueFrom).toEqual({ secretKeyRef: { name: secret.metadata.name, key: 'AENV_API_KEY' } });
      expect(c.envFrom).toEqual([{ configMapRef: { name: config.metadata.name } }]);
    }
  });

  it('services and ports: gateway 8080, scheduler 9090, headless node 8000; /health probes; disruption budgets', () => {
    const ports = (name: string) =>
      (find('default', 'Service', name).spec as { ports: { port: number }[] }).ports;
    expect(ports('aenv-gateway').map((p) => p.port)).toEqual([8080]);
    expect(ports('aenv-scheduler').map((p) => p.port)).toEqual([9090]);
    expect(ports('aenv-node').map((p) => p.port)).toEqual([8000]);
    expect((find('default', 'Service', 'aenv-node').spec as { clusterIP: string }).clusterIP).toBe('None');
    const gw = pod(find('default', 'Deployment', 'aenv-gateway')).containers[0]!;
    expect(gw.command).toEqual(['/opt/aenv/bin/aenv-gateway']);
    expect(gw.ports).toEqual([{ name: 'http', containerPort: 8080 }]);
    for (const [name, port] of [
      ['aenv-gateway', 'http'],
      ['aenv-scheduler', 'rpc'],
    ] as const) {
      const c = pod(find('default', 'Deployment', name)).containers[0]!;
      for (const probe of [c.readinessProbe, c.livenessProbe]) {
        expect(probe?.httpGet).toEqual({ path: '/health', port });
      }
    }
    const pdbs = rendered
      .default!.filter((o) => o.kind === 'PodDisruptionBudget')
      .map((o) => o.metadata.name);
    expect(pdbs.sort()).toEqual(['aenv-gateway', 'aenv-node', 'aenv-scheduler']);
  });

  it('default runs Redis in the cluster on a claim with an append-only file; local uses an external Redis URL and one replica each', () => {
    expect(find('default', 'ConfigMap', 'aenv-config').data!.AENV_SCHEDULER_STORE).toBe(
      'redis://aenv-redis:6379',
    );
    const redis = find('default', 'Deployment', 'aenv-redis').spec as { template: { spec: PodSpec } };
    const args = (redis.template.spec.containers[0] as Container & { args: string[] }).args.join(' ');
    expect(args).toContain('--appendonly yes');
    expect(redis.template.spec.volumes).toEqual([
      { name: 'data', persistentVolumeClaim: { claimName: 'aenv-redis-data' } },
    ]);
    expect(find('default', 'PersistentVolumeClaim', 'aenv-redis-data')).toBeDefined();
    for (const name of ['aenv-gateway', 'aenv-scheduler'])
      expect((find('default', 'Deployment', name).spec as { replicas: number }).replicas).toBe(2);
    expect(rendered.local!.some((o) => o.metadata.name.startsWith('aenv-redis'))).toBe(false);
    expect(find('local', 'ConfigMap', 'aenv-config').data!.AENV_SCHEDULER_STORE).toMatch(
      /^redis:\/\/(?!aenv-redis)/,
    );
    for (const name of ['aenv-gateway', 'aenv-scheduler']) {
      expect((find('local', 'Deployment', name).spec as { replicas: number }).replicas).toBe(1);
    }
  });
});
