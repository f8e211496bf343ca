import { join } from 'node:path';
import {
  allContainers, Container, K8sObject, KUBERNETES_DIR, LabelSelector, podTemplates, PodTemplate, render, selects, validateAgainstSchema,
} from './rendered-manifests';

// deploy/kubernetes rendered as `kubectl apply -k` would, then checked object by object
// against the Kubernetes schemas and against the rules Runbox's deployment promises.
const OVERLAYS = ['dev', 'production'];
const rendered = new Map<string, K8sObject[]>(OVERLAYS.map((o) => [o, render(join(KUBERNETES_DIR, 'overlays', o))]));

const ENGINE = 'engine';
const PRIVATE_RANGES = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'];

function named(objects: K8sObject[], kind: string, name: string): K8sObject {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind}/${name}`);
  return found;
}

function where(pod: PodTemplate, container: Container): string {
  return `${pod.owner.kind}/${pod.owner.metadata.name} container ${container.name}`;
}

interface NetworkPolicySpec {
  podSelector: LabelSelector;
  policyTypes?: string[];
  ingress?: Array<{ ports?: Array<{ protocol?: string; port: number }> }>;
  egress?: Array<{ to?: Array<{ ipBlock?: { cidr: string; except?: string[] } }> }>;
}

describe.each(OVERLAYS)('the %s overlay', (overlay) => {
  const objects = rendered.get(overlay)!;
  const pods = podTemplates(objects);

  it('renders every object valid against the Kubernetes schemas', () => {
    expect(objects.length).toBeGreaterThan(10);
    const errors: string[] = [];
    for (const object of objects) {
      try {
        validateAgainstSchema(object);
      } catch (err) {
        errors.push((err as Error).message);
      }
    }
    expect(errors).toEqual([]);
  });

  it('puts everything in one namespace', () => {
    const namespaces = new Set(objects.filter((o) => o.kind !== 'Namespace').map((o) => o.metadata.namespace));
    expect(namespaces.size).toBe(1);
    expect([...namespaces][0]).toBe(named(objects, 'Namespace', [...namespaces][0]!).metadata.name);
  });

  it('mounts no host path, least of all a Docker socket', () => {
    const hostPaths = pods.flatMap((p) => (p.spec.volumes ?? []).filter((v) => v.hostPath).map((v) => `${p.owner.metadata.name}: ${v.hostPath!.path}`));
    expect(hostPaths).toEqual([]);
    const socketEnv = pods.flatMap((p) => allContainers(p.spec).flatMap((c) => (c.env ?? []).filter((e) => e.name === 'DOCKER_HOST').map((e) => e.value)));
    for (const value of socketEnv) expect(value).not.toContain('/var/run/docker.sock');
  });

  it('gives every container cpu and memory requests and limits', () => {
    for (const pod of pods) {
      for (const c of allContainers(pod.spec)) {
        for (const kind of ['requests', 'limits'] as const) {
          expect({ at: where(pod, c), cpu: c.resources?.[kind]?.cpu !== undefined, memory: c.resources?.[kind]?.memory !== undefined })
            .toEqual({ at: where(pod, c), cpu: true, memory: true });
        }
      }
    }
  });

  it('probes every container that serves a port, and every long-running sidecar', () => {
    for (const pod of pods) {
      for (const c of allContainers(pod.spec)) {
        const serves = (c.ports ?? []).length > 0;
        const sidecar = c.restartPolicy === 'Always';
        if (serves) expect({ at: where(pod, c), readiness: !!c.readinessProbe, liveness: !!c.livenessProbe }).toEqual({ at: where(pod, c), readiness: true, liveness: true });
        if (sidecar) expect({ at: where(pod, c), startup: !!c.startupProbe }).toEqual({ at: where(pod, c), startup: true });
      }
    }
  });

  it('runs everything as non-root on a read-only root, except the executor engine sidecar', () => {
    for (const pod of pods) {
      for (const c of allContainers(pod.spec)) {
        const sc = { ...pod.spec.securityContext, ...c.securityContext };
        if (c.name === ENGINE) {
          expect(pod.owner.metadata.name).toBe('runbox-executor');
          expect(sc.privileged).toBe(true);
          continue;
        }
        expect({
          at: where(pod, c), runAsNonRoot: sc.runAsNonRoot, nonZeroUser: (sc.runAsUser ?? 0) > 0, privileged: sc.privileged ?? false,
          escalation: sc.allowPrivilegeEscalation, readOnlyRoot: sc.readOnlyRootFilesystem, dropsAll: sc.capabilities?.drop?.includes('ALL') ?? false,
        }).toEqual({ at: where(pod, c), runAsNonRoot: true, nonZeroUser: true, privileged: false, escalation: false, readOnlyRoot: true, dropsAll: true });
      }
    }
  });

  it('mounts no service-account token into any pod', () => {
    for (const pod of pods) expect({ at: pod.owner.metadata.name, automount: pod.spec.automountServiceAccountToken }).toEqual({ at: pod.owner.metadata.name, automount: false });
  });

  it('pins every image by a tag (not latest) or a digest', () => {
    const images = pods.flatMap((p) => allContainers(p.spec).map((c) => c.image ?? ''));
    expect(images.length).toBeGreaterThan(0);
    for (const image of images) expect(image).toMatch(/(:(?!latest$)[\w][\w.-]{0,127}|@sha256:[0-9a-f]{64})$/);
  });

  it('selects every Runbox pod by the default-deny policy and by a policy of its own', () => {
    const policies = objects.filter((o) => o.kind === 'NetworkPolicy').map((o) => ({ name: o.metadata.name, spec: o.spec as unknown as NetworkPolicySpec }));
    const denyAll = policies.filter((p) => Object.keys(p.spec.podSelector).length === 0 && !p.spec.ingress && !p.spec.egress
      && ['Ingress', 'Egress'].every((t) => p.spec.policyTypes?.includes(t)));
    expect(denyAll.map((p) => p.name)).toEqual(['runbox-default-deny']);
    for (const pod of pods) {
      const own = policies.filter((p) => Object.keys(p.spec.podSelector).length > 0 && selects(p.spec.podSelector, pod.labels)
        && p.name !== 'runbox-dns');
      expect({ pod: pod.owner.metadata.name, selected: own.length > 0 }).toEqual({ pod: pod.owner.metadata.name, selected: true });
    }
  });

  it("keeps the gateway's internet egress off private ranges", () => {
    const gateway = named(objects, 'NetworkPolicy', 'runbox-gateway').spec as unknown as NetworkPolicySpec;
    const anywhere = (gateway.egress ?? []).flatMap((r) => r.to ?? []).map((t) => t.ipBlock).filter((b) => b?.cidr === '0.0.0.0/0');
    expect(anywhere).toHaveLength(1);
    expect(anywhere[0]!.except).toEqual(expect.arrayContaining(PRIVATE_RANGES));
  });

  it('probes the gateway at /readyz and /healthz', () => {
    const gateway = podTemplates([named(objects, 'Deployment', 'runbox-gateway')])[0]!.spec.containers[0]!;
    expect(gateway.readinessProbe).toMatchObject({ httpGet: { path: '/readyz' } });
    expect(gateway.livenessProbe).toMatchObject({ httpGet: { path: '/healthz' } });
  });

  it('probes the executor at /readyz and /healthz on its HTTP port, which its policy lets in', () => {
    const executor = podTemplates([named(objects, 'StatefulSet', 'runbox-executor')])[0]!.spec.containers.find((c) => c.name === 'executor')!;
    const http = (executor.ports ?? []).find((p) => p.name === 'http');
    expect(http?.containerPort).toBe(8081);
    expect(executor.readinessProbe).toMatchObject({ httpGet: { path: '/readyz', port: 'http' } });
    expect(executor.livenessProbe).toMatchObject({ httpGet: { path: '/healthz', port: 'http' } });
    const policy = named(objects, 'NetworkPolicy', 'runbox-executor').spec as unknown as NetworkPolicySpec;
    const open = (policy.ingress ?? []).flatMap((r) => r.ports ?? []).map((p) => p.port);
    expect(open).toEqual([8081]);
  });

  it('gives each executor pod its own engine: privileged sidecar, pod volume, socket on a shared emptyDir, id from the pod name', () => {
    const executorSet = named(objects, 'StatefulSet', 'runbox-executor');
    const pod = podTemplates([executorSet])[0]!;
    const engine = pod.spec.initContainers?.find((c) => c.name === ENGINE);
    const executor = pod.spec.containers.find((c) => c.name === 'executor')!;
    expect(engine?.restartPolicy).toBe('Always');
    const claims = (executorSet.spec as { volumeClaimTemplates: Array<{ metadata: { name: string } }> }).volumeClaimTemplates.map((v) => v.metadata.name);
    expect(engine?.volumeMounts).toEqual(expect.arrayContaining([{ name: 'engine-data', mountPath: '/var/lib/docker' }]));
    expect(claims).toContain('engine-data');
    const socketVolume = engine?.volumeMounts?.find((m) => m.mountPath === '/run/runbox-engine')?.name;
    expect(pod.spec.volumes?.find((v) => v.name === socketVolume)?.emptyDir).toBeDefined();
    expect(executor.volumeMounts).toEqual(expect.arrayContaining([{ name: socketVolume, mountPath: '/run/runbox-engine' }]));
    expect(executor.env).toEqual(expect.arrayContaining([
      { name: 'RUNBOX_EXECUTOR_ID', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'DOCKER_HOST', value: 'unix:///run/runbox-engine/docker.sock' },
    ]));
  });

  it('runs the migrations as a Job with the schema owner URL from the Secret', () => {
    const job = podTemplates([named(objects, 'Job', 'runbox-migrate')])[0]!.spec.containers[0]!;
    expect(job.env).toEqual([{ name: 'MIGRATION_DATABASE_URL', valueFrom: { secretKeyRef: { name: 'runbox-secrets', key: 'MIGRATION_DATABASE_URL' } } }]);
  });
});

describe('the production overlay', () => {
  const objects = rendered.get('production')!;

  it('runs NATS as a three-node JetStream cluster', () => {
    const nats = named(objects, 'StatefulSet', 'runbox-nats');
    expect(nats.spec?.replicas).toBe(3);
    const server = podTemplates([nats])[0]!.spec.containers[0]! as Container & { args: string[] };
    expect(server.args).toEqual(expect.arrayContaining(['--cluster_name=runbox', '--server_name=$(POD_NAME)']));
    const routes = server.args.find((a) => a.startsWith('--routes='))!.slice('--routes='.length).split(',');
    expect(routes).toHaveLength(3);
  });

  it('autoscales the gateway and keeps every budget on pods that exist', () => {
    const hpa = named(objects, 'HorizontalPodAutoscaler', 'runbox-gateway');
    expect(hpa.spec?.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'runbox-gateway' });
    const budgets = objects.filter((o) => o.kind === 'PodDisruptionBudget');
    expect(budgets.map((b) => b.metadata.name).sort()).toEqual(['runbox-executor', 'runbox-gateway', 'runbox-nats']);
    const pods = podTemplates(objects);
    for (const budget of budgets) {
      const selector = budget.spec?.selector as LabelSelector;
      expect({ budget: budget.metadata.name, matches: pods.filter((p) => selects(selector, p.labels)).length }).toEqual({ budget: budget.metadata.name, matches: 1 });
    }
  });

  it('takes database URLs from a Secret it does not ship, and scrapes the gateway service', () => {
    expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
    const monitor = named(objects, 'ServiceMonitor', 'runbox-gateway');
    const service = named(objects, 'Service', 'runbox-gateway');
    expect(selects(monitor.spec?.selector as LabelSelector, service.metadata.labels ?? {})).toBe(true);
    const ports = (service.spec?.ports as Array<{ name: string }>).map((p) => p.name);
    expect(ports).toContain((monitor.spec?.endpoints as Array<{ port: string }>)[0]!.port);
  });

  it('scrapes every executor through the headless service', () => {
    const monitor = named(objects, 'ServiceMonitor', 'runbox-executor');
    const service = named(objects, 'Service', 'runbox-executor');
    expect(selects(monitor.spec?.selector as LabelSelector, service.metadata.labels ?? {})).toBe(true);
    const endpoint = (monitor.spec?.endpoints as Array<{ port: string; path: string }>)[0]!;
    expect(endpoint.path).toBe('/metrics');
    const ports = service.spec?.ports as Array<{ name: string; port: number }>;
    expect(ports.find((p) => p.name === endpoint.port)?.port).toBe(8081);
  });

  it('keeps server-sent event streams open through the Ingress', () => {
    const ingress = named(objects, 'Ingress', 'runbox');
    const annotations = (ingress.metadata as { annotations?: Record<string, string> }).annotations ?? {};
    expect(Number(annotations['nginx.ingress.kubernetes.io/proxy-read-timeout'])).toBeGreaterThanOrEqual(3600);
    expect(annotations['nginx.ingress.kubernetes.io/proxy-buffering']).toBe('off');
  });
});
