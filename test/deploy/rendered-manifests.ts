import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import * as coreV1 from 'kubernetes-models/v1';
import * as appsV1 from 'kubernetes-models/apps/v1';
import * as batchV1 from 'kubernetes-models/batch/v1';
import * as networkingV1 from 'kubernetes-models/networking.k8s.io/v1';
import * as policyV1 from 'kubernetes-models/policy/v1';
import * as autoscalingV2 from 'kubernetes-models/autoscaling/v2';
import * as monitoringV1 from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';

export const KUBERNETES_DIR = join(__dirname, '..', '..', 'deploy', 'kubernetes');

/** A rendered object as YAML gives it: only apiVersion, kind and metadata are certain. */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec?: Record<string, unknown>;
  [field: string]: unknown;
}

/** `kubectl kustomize DIR`, parsed. Bounded: a hung render fails the test, not the suite. */
export function render(dir: string): K8sObject[] {
  let out: string;
  try {
    out = execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8', timeout: 60_000, maxBuffer: 16 << 20 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new Error('kubectl (1.27 or newer, with kustomize 5) is needed to render deploy/kubernetes');
    throw err;
  }
  return parseAllDocuments(out).map((doc) => {
    if (doc.errors.length > 0) throw new Error(`${dir}: ${doc.errors[0].message}`);
    return doc.toJS() as K8sObject;
  });
}

type Validating = new (data: unknown) => { validate(): void };

/** The schema classes by apiVersion. A kind missing here fails validation: no silent passes. */
const MODELS: Record<string, Record<string, unknown>> = {
  v1: coreV1,
  'apps/v1': appsV1,
  'batch/v1': batchV1,
  'networking.k8s.io/v1': networkingV1,
  'policy/v1': policyV1,
  'autoscaling/v2': autoscalingV2,
  'monitoring.coreos.com/v1': monitoringV1,
};

/** Validates an object against the Kubernetes OpenAPI schema of its kind; throws naming it. */
export function validateAgainstSchema(object: K8sObject): void {
  const model = MODELS[object.apiVersion]?.[object.kind];
  if (typeof model !== 'function') throw new Error(`${object.apiVersion} ${object.kind} has no schema to validate against`);
  try {
    new (model as Validating)(withUnwrappedSecretData(object)).validate();
  } catch (err) {
    throw new Error(`${object.kind}/${object.metadata.name}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/**
 * Kustomize folds long base64 values in a Secret's data over several lines; the API server
 * decodes them with the line breaks ignored (Go's base64 skips \r and \n), while the
 * schema's "byte" format does not allow them. Join them, as the server reads them.
 */
function withUnwrappedSecretData(object: K8sObject): K8sObject {
  if (object.kind !== 'Secret' || typeof object.data !== 'object' || object.data === null) return object;
  const data = Object.fromEntries(Object.entries(object.data as Record<string, string>).map(([k, v]) => [k, v.replace(/[\r\n]/g, '')]));
  return { ...object, data };
}

export interface Container {
  name: string;
  image?: string;
  ports?: Array<{ name?: string; containerPort: number }>;
  restartPolicy?: string;
  readinessProbe?: unknown;
  livenessProbe?: unknown;
  startupProbe?: unknown;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: SecurityContext;
  volumeMounts?: Array<{ name: string; mountPath: string }>;
  env?: Array<{ name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }>;
}

export interface SecurityContext {
  runAsNonRoot?: boolean;
  runAsUser?: number;
  privileged?: boolean;
  allowPrivilegeEscalation?: boolean;
  readOnlyRootFilesystem?: boolean;
  capabilities?: { drop?: string[] };
}

export interface PodSpec {
  automountServiceAccountToken?: boolean;
  securityContext?: SecurityContext;
  containers: Container[];
  initContainers?: Container[];
  volumes?: Array<{ name: string; hostPath?: { path: string }; emptyDir?: unknown }>;
}

/** A workload's pod template, with whose it is. */
export interface PodTemplate {
  owner: K8sObject;
  labels: Record<string, string>;
  spec: PodSpec;
}

export function podTemplates(objects: K8sObject[]): PodTemplate[] {
  const kinds = ['Deployment', 'StatefulSet', 'DaemonSet', 'Job', 'ReplicaSet'];
  return objects
    .filter((o) => kinds.includes(o.kind))
    .map((owner) => {
      const template = (owner.spec as { template: { metadata?: { labels?: Record<string, string> }; spec: PodSpec } }).template;
      return { owner, labels: template.metadata?.labels ?? {}, spec: template.spec };
    });
}

export function allContainers(spec: PodSpec): Container[] {
  return [...(spec.initContainers ?? []), ...spec.containers];
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist'; values?: string[] }>;
}

/** Kubernetes label-selector semantics (an empty selector selects everything). */
export function selects(selector: LabelSelector, labels: Record<string, string>): boolean {
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) if (labels[key] !== value) return false;
  for (const { key, operator, values = [] } of selector.matchExpressions ?? []) {
    const has = key in labels;
    const ok =
      operator === 'In' ? has && values.includes(labels[key]) :
      operator === 'NotIn' ? !has || !values.includes(labels[key]) :
      operator === 'Exists' ? has : !has;
    if (!ok) return false;
  }
  return true;
}
