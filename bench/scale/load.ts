/**
 * One load process of the scale bench (forked by run.ts): it hosts its share of the simulated
 * nodes, heartbeating every interval as the node agent does, and on command runs client loops
 * that call Schedule as fast as the scheduler answers, as the gateway calls it (Connect, binary,
 * HTTP/1.1). In the `full` flow each placement is then assigned (RecordAssignment, as the gateway
 * does after the start) and started on its node, whichever process hosts that node.
 */
import { performance } from 'node:perf_hooks';
import { createClient, type Interceptor } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { PlacementKind, SchedulerService } from '@agentenv/protocol/scheduler';
import { createSchedulerClient, type SchedulerClient } from '@agentenv/scheduler';
import { SimNode, templateId } from './sim-node.js';
import {
  nodeIndexOf,
  nodeName,
  owner,
  type FromLoad,
  type LoadInit,
  type PhaseResult,
  type PhaseStart,
  type ToLoad,
} from './protocol.js';

const send = (m: FromLoad) => process.send!(m);

class Load {
  private readonly nodes = new Map<number, SimNode>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly gateway: SchedulerClient;
  private readonly nodeClient: SchedulerClient;
  private stopped = false;
  private measuring = false;
  private hb = { count: 0, errors: 0, latencies: [] as number[] };
  private outbox: [number, string, string][] = [];
  private seq = 0;

  constructor(private readonly o: LoadInit) {
    this.nodeClient = createSchedulerClient({ url: o.url, apiKey: o.apiKey });
    const auth: Interceptor = (next) => (req) => {
      req.header.set('x-api-key', o.apiKey);
      return next(req);
    };
    this.gateway = createClient(
      SchedulerService,
      createConnectTransport({
        baseUrl: o.url,
        httpVersion: '1.1',
        useBinaryFormat: true,
        interceptors: [auth],
        defaultTimeoutMs: 10_000,
      }),
    );
    for (let i = o.proc; i < o.nodes; i += o.procs)
      this.nodes.set(i, new SimNode(nodeName(i), i, o.shape, this.nodeClient));
  }

  /** Every node heartbeats from a random point of the first interval on; resolves once all joined. */
  async start(): Promise<void> {
    let left = this.nodes.size;
    const all = new Promise<void>((resolve) =>
      left === 0 ? resolve() : (this.onJoin = () => --left || resolve()),
    );
    for (const node of this.nodes.values()) this.schedule(node, Math.random() * this.o.intervalMs, true);
    await all;
  }

  private onJoin: () => void = () => undefined;

  private schedule(node: SimNode, delayMs: number, first: boolean): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      void this.beat(node, first);
    }, delayMs);
    this.timers.add(t);
  }

  private async beat(node: SimNode, first: boolean): Promise<void> {
    const t0 = performance.now();
    let ok = false;
    try {
      await this.nodeClient.heartbeat(node.heartbeat(), { timeoutMs: 5000 });
      ok = true;
    } catch {
      // A node retries with its next heartbeat.
    }
    const ms = performance.now() - t0;
    if (this.measuring) {
      this.hb.count++;
      if (ok) this.hb.latencies.push(ms);
      else this.hb.errors++;
    }
    if (first && ok) this.onJoin();
    if (!this.stopped) this.schedule(node, Math.max(0, this.o.intervalMs - ms), first && !ok);
  }

  async phase(p: PhaseStart): Promise<PhaseResult> {
    const r: PhaseResult = {
      type: 'result',
      placements: 0,
      errors: 0,
      latenciesMs: [],
      heartbeats: 0,
      heartbeatErrors: 0,
      heartbeatLatenciesMs: [],
      cpuMs: 0,
    };
    this.hb = { count: 0, errors: 0, latencies: [] };
    this.measuring = true;
    const cpu0 = process.cpuUsage();
    const end = performance.now() + p.ms;
    const flusher = setInterval(() => this.flushOutbox(), 50);
    await Promise.all(Array.from({ length: p.clients }, () => this.client(p, end, r)));
    if (p.clients === 0) await new Promise((resolve) => setTimeout(resolve, p.ms));
    clearInterval(flusher);
    this.flushOutbox();
    this.measuring = false;
    const cpu = process.cpuUsage(cpu0);
    r.cpuMs = (cpu.user + cpu.system) / 1000;
    r.heartbeats = this.hb.count;
    r.heartbeatErrors = this.hb.errors;
    r.heartbeatLatenciesMs = this.hb.latencies;
    return r;
  }

  private async client(p: PhaseStart, end: number, r: PhaseResult): Promise<void> {
    while (performance.now() < end) {
      const template = templateId(Math.floor(Math.random() * this.o.shape.templates));
      const t0 = performance.now();
      try {
        const res = await this.gateway.schedule({ kind: PlacementKind.CREATE, templateId: template });
        r.latenciesMs.push(performance.now() - t0);
        r.placements++;
        if (p.flow === 'full') await this.assign(res.node!.nodeId, res.reservationId, template);
      } catch (err) {
        r.errors++;
        r.firstError ??= (err as Error).message;
      }
    }
  }

  private async assign(nodeId: string, reservationId: string, template: string): Promise<void> {
    const sandboxId = `sbx-${this.o.proc}-${this.seq++}`;
    await this.gateway.recordAssignment({
      nodeId,
      reservationId,
      sandboxIds: [sandboxId],
      templateId: template,
    });
    this.started([[nodeIndexOf(nodeId), sandboxId, template]]);
  }

  /** Starts sandboxes on this process's nodes; the others go to their process through the parent. */
  started(items: [number, string, string][]): void {
    for (const item of items) {
      const node = this.nodes.get(item[0]);
      if (node) node.started(item[1], item[2]);
      else if (owner(item[0], this.o.procs) !== this.o.proc) this.outbox.push(item);
    }
  }

  private flushOutbox(): void {
    if (this.outbox.length) send({ type: 'started', items: this.outbox.splice(0) });
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
  }
}

let load: Load | undefined;
process.on('message', (m: ToLoad) => {
  if (m.type === 'init') {
    load = new Load(m);
    void load.start().then(() => send({ type: 'joined' }));
  } else if (m.type === 'phase') void load!.phase(m).then(send);
  else if (m.type === 'started') load!.started(m.items);
  else {
    load?.stop();
    process.disconnect();
  }
});
process.on('disconnect', () => {
  load?.stop();
  process.exit(0);
});
