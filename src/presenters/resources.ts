import { TASK_ERROR_MESSAGE_MAX_LENGTH, type TaskResource } from '../../schemas/resources.js';
import type { TaskRecord } from '../core/task.js';
import type { PricedRequest } from '../core/pricing.js';
import type { MediaResource } from '../../schemas/resources.js';
import type { MediaRecord } from '../store/port.js';

/** Signs the URLs a task carries: media downloads and its event stream (services/media-url-signer). */
export interface MediaUrlSigner {
  signedUrl(mediaId: string, now: Date): { url: string; expiresAt: Date };
  streamUrl(taskId: string, now: Date): { url: string; expiresAt: Date };
}

const iso = (d: Date | null) => (d === null ? null : d.toISOString());

export function toTaskResource(task: TaskRecord, signer: MediaUrlSigner, now: Date): TaskResource {
  const stream = signer.streamUrl(task.id, now);
  return {
    task_id: task.id,
    status: task.status,
    cost: task.cost,
    generated: task.generated.map((item) => {
      const signed = signer.signedUrl(item.media_id, now);
      // Generators store only the image types a media record can hold (MediaResource.content_type).
      const contentType = item.content_type as MediaResource['content_type'];
      const resizedFrom = item.resized_from ?? null;
      return {
        ...item,
        content_type: contentType,
        url: signed.url,
        url_expires_at: signed.expiresAt.toISOString(),
        resized_from: resizedFrom,
      };
    }),
    // Records hold what the catalog allowed at creation; the store types them as plain strings.
    model: task.model as TaskResource['model'],
    prompt: task.prompt,
    image_reference: task.imageReference,
    parameters: task.parameters as TaskResource['parameters'],
    webhook_url: task.webhookUrl,
    // A backend's message can be long; the resource promises at most this many characters.
    error: task.error && { code: task.error.code, message: task.error.message.slice(0, TASK_ERROR_MESSAGE_MAX_LENGTH) },
    created_at: task.createdAt.toISOString(),
    started_at: iso(task.startedAt),
    completed_at: iso(task.completedAt),
    stream_url: stream.url,
    stream_url_expires_at: stream.expiresAt.toISOString(),
  };
}

export function toMediaResource(media: MediaRecord): MediaResource {
  return {
    media_id: media.id,
    content_type: media.contentType as MediaResource['content_type'],
    width: media.width,
    height: media.height,
    size_bytes: media.sizeBytes,
    sha256: media.sha256,
    source: media.source,
    created_at: media.createdAt.toISOString(),
    expires_at: media.expiresAt.toISOString(),
  };
}

/** A priced request as the Estimate resource (POST /api/v1/images/estimates, the MCP tool estimate_price). */
export function toEstimateResource(priced: PricedRequest) {
  return {
    // Records hold what the catalog allowed; the core types them as plain strings.
    model: priced.model.id as TaskResource['model'],
    cost: priced.cost,
    parameters: priced.parameters as TaskResource['parameters'],
    width: priced.width,
    height: priced.height,
  };
}
