import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseAllDocuments, parse } from 'yaml';

/** A Kubernetes object as the manifests write it. */
export type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
} & Record<string, any>;

const SUPPORTED = new Set(['apiVersion', 'kind', 'resources', 'labels', 'images']);

/**
 * The objects `kubectl apply -k dir` would send, for the features the project's base uses
 * (resources, labels without selectors, images): a kustomization using anything else is refused,
 * so that the tests never check less than what is applied.
 */
export function renderKustomization(dir: string): K8sObject[] {
  const kustomization = parse(readFileSync(join(dir, 'kustomization.yaml'), 'utf8'));
  for (const key of Object.keys(kustomization))
    if (!SUPPORTED.has(key)) throw new Error(`kustomization.yaml: ${key} is not rendered by the tests`);
  const objects: K8sObject[] = [];
  for (const file of kustomization.resources as string[]) {
    for (const doc of parseAllDocuments(readFileSync(join(dir, file), 'utf8'))) {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0].message}`);
      const object = doc.toJS() as K8sObject | null;
      if (object) objects.push(object);
    }
  }
  for (const { pairs, includeSelectors, includeTemplates } of kustomization.labels ?? []) {
    if (includeSelectors) throw new Error('labels with includeSelectors are not rendered by the tests');
    for (const object of objects) {
      object.metadata.labels = { ...object.metadata.labels, ...pairs };
      const template = object.spec?.template ?? object.spec?.jobTemplate?.spec?.template;
      if (includeTemplates && template)
        template.metadata = { ...template.metadata, labels: { ...template.metadata?.labels, ...pairs } };
    }
  }
  for (const { name, newName, newTag } of kustomization.images ?? []) {
    for (const container of objects.flatMap(podContainers)) {
      if (container.image === name || container.image.startsWith(`${name}:`))
        container.image = `${newName ?? name}:${newTag ?? 'latest'}`;
    }
  }
  return objects;
}

export function podSpec(object: K8sObject): any {
  return object.spec?.template?.spec ?? object.spec?.jobTemplate?.spec?.template?.spec;
}

export function podContainers(object: K8sObject): any[] {
  const spec = podSpec(object);
  return spec ? [...(spec.initContainers ?? []), ...spec.containers] : [];
}

export const kubernetesDir = join(dirname(new URL(import.meta.url).pathname), '../../deploy/kubernetes');
