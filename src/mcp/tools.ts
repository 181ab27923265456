import type { ValidateFunction } from 'ajv';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { GENERATION_REQUEST_SCHEMAS, type GenerationRequest, MODEL_CATALOG } from '../../schemas/catalog.js';
import { SHARED_SCHEMAS } from '../../schemas/resources.js';
import { DomainError } from '../core/errors.js';
import type { ResolutionCheck } from '../core/size-plan.js';
import type { TaskRecord } from '../core/task.js';
import { bodyAjv, invalidRequestOf, validateGenerationRequest } from '../contract/validation.js';
import { previewOf } from '../images/preview.js';
import { toModelResource } from '../presenters/models.js';
import { toEstimateResource, toMediaResource, toTaskResource, type MediaUrlSigner } from '../presenters/resources.js';
import type { AccountService } from '../services/account-service.js';
import type { GenerationOrder, GenerationSubmission } from '../services/generation-submission.js';
import { jsonRequestFingerprint } from '../services/idempotency.js';
import type { MediaService } from '../services/media-service.js';
import type { ReferenceImport } from '../services/reference-import.js';
import type { TaskService } from '../services/task-service.js';
import { toolErrorOf, type ToolErrorContext } from './tool-errors.js';
import {
  CancelTaskArguments,
  DEFAULT_WAIT_SECONDS,
  GenerateOptions,
  GetTaskArguments,
  NoArguments,
  TOOL_DEFINITIONS,
  UploadReferenceArguments,
  type ToolName,
} from './tool-schemas.js';

export interface ImageToolsDependencies {
  submission: GenerationSubmission;
  tasks: TaskService;
  media: MediaService;
  references: ReferenceImport;
  accounts: Pick<AccountService, 'balance'>;
  signer: MediaUrlSigner;
  resolutionCheck: ResolutionCheck;
  now: () => Date;
}

/** One tools/call: who calls, and the MCP request's means to report progress and to be cancelled. */
export interface ToolCall extends ToolErrorContext {
  accountId: string;
  /** The API key of the call (its scope is checked at admission). */
  key?: GenerationOrder['key'];
  /** Aborted when the client cancels the call or goes away. */
  signal: AbortSignal;
  /** Set when the client sent a progressToken: sends one notifications/progress. */
  progress?: (progress: number, message: string) => Promise<void>;
  /** Spends one create of the key's creates budget, or throws the 429 (a DomainError with its wait). */
  spendCreate: () => Promise<void>;
}

/** While a wait goes on without a change, a progress notification this often says the task is alive. */
const PROGRESS_HEARTBEAT_MS = 10_000;
/** The fingerprint's "path" of an Idempotency-Key used by generate_image: a key used on REST is not replayed here. */
const IDEMPOTENCY_SCOPE = 'mcp:generate_image';
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

type ToolArguments = Record<string, unknown>;

/**
 * The MCP tools over the services the REST routes use (docs/decisions/0026): no rule of money or
 * tasks is written here, and nothing here reaches the store. Every failure comes back as a tool
 * error through toolErrorOf.
 */
export class ImageTools {
  private readonly validators: Record<Exclude<ToolName, 'generate_image' | 'estimate_price'>, ValidateFunction>;
  private readonly validateRequest: ValidateFunction;
  private readonly validateGenerateOptions: ValidateFunction;
  private readonly models: ReturnType<typeof toModelResource>[];

  constructor(private readonly deps: ImageToolsDependencies) {
    const ajv = bodyAjv([...GENERATION_REQUEST_SCHEMAS, ...SHARED_SCHEMAS]);
    this.validateRequest = validateGenerationRequest();
    this.validateGenerateOptions = ajv.compile(GenerateOptions);
    this.validators = {
      list_models: ajv.compile(NoArguments),
      get_balance: ajv.compile(NoArguments),
      get_task: ajv.compile(GetTaskArguments),
      cancel_task: ajv.compile(CancelTaskArguments),
      upload_reference: ajv.compile(UploadReferenceArguments),
    };
    this.models = MODEL_CATALOG.map((model) => toModelResource(model, deps.resolutionCheck));
  }

  async call(name: string, args: ToolArguments, call: ToolCall): Promise<CallToolResult> {
    try {
      switch (name as ToolName) {
        case 'list_models':
          this.check('list_models', args);
          return this.result({ models: this.models }, `${this.models.length} models: ${this.modelSummary()}`);
        case 'estimate_price':
          return await this.estimatePrice(args, call);
        case 'generate_image':
          return await this.generateImage(args, call);
        case 'get_task':
          return await this.getTask(args, call);
        case 'cancel_task':
          return await this.cancelTask(args, call);
        case 'get_balance': {
          this.check('get_balance', args);
          const balance = await this.deps.accounts.balance(call.accountId);
          return this.result({ account_id: call.accountId, balance }, `The balance is ${balance} tokens.`);
        }
        case 'upload_reference':
          return await this.uploadReference(args, call);
        default: {
          const tools = Object.keys(TOOL_DEFINITIONS).join(', ');
          throw new DomainError('not_found', `There is no tool named ${JSON.stringify(name)}; the tools are ${tools}.`);
        }
      }
    } catch (error) {
      return toolErrorOf(error, call);
    }
  }

  private async estimatePrice(args: ToolArguments, call: ToolCall): Promise<CallToolResult> {
    const request = this.generationRequest(args);
    const estimate = toEstimateResource(await this.deps.submission.estimate(call.accountId, request, call.key));
    return this.result(
      estimate,
      `${estimate.model} at ${estimate.parameters.resolution} ${estimate.parameters.aspect_ratio} (${estimate.width}x${estimate.height}) costs ${estimate.cost} tokens. Nothing was charged.`,
    );
  }

  private async generateImage(args: ToolArguments, call: ToolCall): Promise<CallToolResult> {
    const { idempotency_key: idempotencyKey, wait_seconds: waitSeconds, ...body } = args;
    const options = { idempotency_key: idempotencyKey, wait_seconds: waitSeconds };
    if (!this.validateGenerateOptions(withoutUndefined(options)))
      throw invalidRequestOf(this.validateGenerateOptions.errors ?? [], 'body');
    const request = this.generationRequest(body);
    await call.spendCreate();
    // The idempotency_key argument is an Idempotency-Key (docs/design.md §3.8) of its own scope:
    // a key used on REST is not replayed here.
    const submitted = await this.deps.submission.submit({
      accountId: call.accountId,
      ...(call.key && { key: call.key }),
      request,
      idempotency:
        typeof idempotencyKey === 'string'
          ? { key: idempotencyKey, fingerprint: jsonRequestFingerprint('POST', IDEMPOTENCY_SCOPE, request) }
          : null,
      answerOf: ([task]) => ({
        statusCode: 202,
        headers: { 'content-type': JSON_CONTENT_TYPE },
        body: Buffer.from(JSON.stringify({ task_id: task.id })),
      }),
    });
    const taskId = submitted.replayed
      ? (JSON.parse(submitted.response.body.toString('utf8')) as { task_id: string }).task_id
      : submitted.tasks[0].id;
    const task = await this.follow(call, taskId, ((waitSeconds as number | undefined) ?? DEFAULT_WAIT_SECONDS) * 1000);
    const lead = submitted.replayed
      ? `Task ${task.id} was created for this idempotency_key before; nothing was charged again.`
      : `Task ${task.id} created for ${task.cost} tokens.`;
    return this.taskOutcome(task, call, lead);
  }

  private async getTask(args: ToolArguments, call: ToolCall): Promise<CallToolResult> {
    this.check('get_task', args);
    const taskId = (args.task_id as string).toLowerCase();
    const waitMs = ((args.wait_seconds as number | undefined) ?? 0) * 1000;
    const task = await this.follow(call, taskId, waitMs);
    return this.taskOutcome(task, call, '');
  }

  private async cancelTask(args: ToolArguments, call: ToolCall): Promise<CallToolResult> {
    this.check('cancel_task', args);
    const task = await this.deps.tasks.cancel(call.accountId, (args.task_id as string).toLowerCase());
    return this.result(
      { task: toTaskResource(task, this.deps.signer, this.deps.now()) },
      `Task ${task.id} is CANCELED; its ${task.cost} tokens were refunded.`,
    );
  }

  private async uploadReference(args: ToolArguments, call: ToolCall): Promise<CallToolResult> {
    this.check('upload_reference', args);
    const { image_base64: base64, url } = args as { image_base64?: string; url?: string };
    if ((base64 === undefined) === (url === undefined)) {
      const detail = 'Send exactly one of image_base64 and url.';
      const pointer = base64 === undefined ? '/image_base64' : '/url';
      throw new DomainError('invalid_request', `body ${pointer}: ${detail}`, [
        { pointer, location: 'body', code: base64 === undefined ? 'required' : 'not_allowed', detail },
      ]);
    }
    const source = base64 !== undefined ? { base64 } : { url: url as string };
    const media = await this.deps.references.importReference(call.accountId, source, call.signal);
    const resource = toMediaResource(media);
    return this.result(
      resource,
      `Uploaded as media_id ${resource.media_id} (${resource.content_type}, ${resource.width}x${resource.height}); pass it in generate_image image_reference. It expires at ${resource.expires_at}.`,
    );
  }

  /**
   * The task once terminal or when waitMs has passed, through the tasks' one wait. Each change,
   * and a heartbeat while none comes, is a progress notification.
   */
  private async follow(call: ToolCall, taskId: string, waitMs: number): Promise<TaskRecord> {
    const started = Date.now();
    let sent = 0;
    const progress = call.progress;
    const [task] = await this.deps.tasks.waitForTasks(call.accountId, [taskId], {
      waitMs,
      signal: call.signal,
      heartbeatMs: PROGRESS_HEARTBEAT_MS,
      onProgress: async (task) => {
        const seconds = Math.round((Date.now() - started) / 1000);
        await progress?.(++sent, `Task ${task.id}: ${task.status} (${seconds} s)`);
      },
    });
    return task;
  }

  private async taskOutcome(task: TaskRecord, call: ToolCall, lead: string): Promise<CallToolResult> {
    const at = this.deps.now();
    const resource = toTaskResource(task, this.deps.signer, at);
    const intro = lead ? `${lead} ` : '';
    switch (task.status) {
      case 'COMPLETED': {
        const links = resource.generated.map((item, index) => ({
          type: 'resource_link' as const,
          uri: item.url,
          name: `${task.id}-${index}.${item.content_type.split('/')[1]}`,
          mimeType: item.content_type,
          description: `Full-size image ${item.width}x${item.height}; the link works without a key until ${item.url_expires_at}.`,
        }));
        const first = resource.generated[0];
        const media = await this.deps.media.get(call.accountId, first.media_id);
        const preview = await previewOf((await this.deps.media.openContent(media)).body);
        const text =
          `${intro}Task ${task.id} is COMPLETED (cost ${task.cost} tokens).${seedNote(task.parameters.seed)} Full-size ${first.content_type} ${first.width}x${first.height}: ${first.url} (until ${first.url_expires_at}). ` +
          `The inline image is only a preview, downscaled to ${preview.width}x${preview.height} JPEG (${preview.bytes.length} bytes, at most 1 MB); use the link for the real image.`;
        return {
          content: [
            { type: 'text', text },
            ...links,
            { type: 'image', data: preview.bytes.toString('base64'), mimeType: preview.contentType },
          ],
          structuredContent: {
            task: resource,
            preview: {
              content_type: preview.contentType,
              width: preview.width,
              height: preview.height,
              size_bytes: preview.bytes.length,
            },
          },
        };
      }
      case 'FAILED':
        return {
          isError: true,
          content: [
            {
              type: 'text',
              text: `${intro}Task ${task.id} FAILED (${task.error?.code}: ${resource.error?.message}); its ${task.cost} tokens were refunded.`,
            },
          ],
          structuredContent: { task: resource, preview: null },
        };
      case 'CANCELED':
        return this.result(
          { task: resource, preview: null },
          `${intro}Task ${task.id} is CANCELED; its ${task.cost} tokens were refunded.`,
        );
      default:
        return this.result(
          { task: resource, preview: null },
          `${intro}Task ${task.id} is ${task.status} and still running. Follow it with get_task {"task_id": "${task.id}", "wait_seconds": ${DEFAULT_WAIT_SECONDS}}; cancel_task refunds it.`,
        );
    }
  }

  /** The create body of generate_image and estimate_price, checked against the REST body schema. */
  private generationRequest(body: ToolArguments): GenerationRequest {
    if (!this.validateRequest(body)) throw invalidRequestOf(this.validateRequest.errors ?? [], 'body');
    return body as GenerationRequest;
  }

  private check(tool: keyof ImageTools['validators'], args: ToolArguments): void {
    const validate = this.validators[tool];
    if (!validate(args)) throw invalidRequestOf(validate.errors ?? [], 'body');
  }

  private result(structured: Record<string, unknown>, text: string): CallToolResult {
    return { content: [{ type: 'text', text }], structuredContent: structured };
  }

  private modelSummary(): string {
    return this.models
      .map(
        (m) =>
          `${m.id} (${Object.entries(m.prices)
            .map(([resolution, price]) => `${resolution} ${price} tokens`)
            .join(', ')})`,
      )
      .join('; ');
  }
}

function withoutUndefined(object: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(object).filter(([, value]) => value !== undefined));
}

/** How to make the image again, for an agent that reads the text: its seed (none on tasks older than seeds). */
function seedNote(seed: number | null): string {
  return seed === null ? '' : ` Made with seed ${seed}: the same request with parameters.seed ${seed} makes it again.`;
}
