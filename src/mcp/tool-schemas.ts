import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { GENERATION_REQUEST_SCHEMAS } from '../../schemas/catalog.js';
import { Nullable, UuidInput } from '../../schemas/primitives.js';
import { Estimate, MediaResource, ModelResource, SHARED_SCHEMAS, Task } from '../../schemas/resources.js';
import { IDEMPOTENCY_KEY_MAX_LENGTH, IDEMPOTENCY_KEY_PATTERN } from '../services/idempotency.js';

/**
 * The MCP tools' JSON Schemas. Tool schemas travel alone (a client resolves no `$ref` to our
 * OpenAPI components), so the contract's resources are inlined; they are the same TypeBox
 * resources the REST routes answer with, and generation arguments are checked against the REST
 * create body itself (tools.ts), so both surfaces accept and refuse the same requests.
 */

type JsonSchema = Record<string, unknown>;

const SHARED_BY_ID = new Map<string, TSchema>(SHARED_SCHEMAS.map((s) => [s.$id as string, s]));

/** A self-contained copy of schema: every `$ref` to a shared component replaced by it, `$id`s removed. */
export function inlineSchema(schema: unknown): JsonSchema {
  const inline = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(inline);
    if (node === null || typeof node !== 'object') return node;
    const { $ref, $id: _id, ...rest } = node as Record<string, unknown>;
    if (typeof $ref === 'string') {
      const target = SHARED_BY_ID.get($ref);
      if (!target) throw new Error(`no shared schema ${$ref} to inline`);
      return inline(target);
    }
    return Object.fromEntries(Object.entries(rest).map(([key, value]) => [key, inline(value)]));
  };
  // JSON round trip: TypeBox's symbol keys are not part of a schema on the wire.
  return inline(JSON.parse(JSON.stringify(schema))) as JsonSchema;
}

/** The looser of two schemas of one field: enums and consts joined, bounds widened, nested objects merged. */
function looser(a: JsonSchema, b: JsonSchema): JsonSchema {
  const merged: JsonSchema = { ...a };
  const values = (s: JsonSchema) => (s.enum as unknown[] | undefined) ?? ('const' in s ? [s.const] : undefined);
  const [va, vb] = [values(a), values(b)];
  if (va && vb) {
    delete merged.const;
    merged.enum = [...new Set([...va, ...vb])];
  }
  for (const key of ['maxLength', 'maxItems', 'maximum'] as const)
    if (typeof a[key] === 'number' && typeof b[key] === 'number') merged[key] = Math.max(a[key], b[key]);
  for (const key of ['minLength', 'minItems', 'minimum'] as const)
    if (typeof a[key] === 'number' && typeof b[key] === 'number') merged[key] = Math.min(a[key], b[key]);
  if (a.properties && b.properties) {
    const pa = a.properties as Record<string, JsonSchema>;
    const pb = b.properties as Record<string, JsonSchema>;
    merged.properties = Object.fromEntries(
      [...new Set([...Object.keys(pa), ...Object.keys(pb)])].map((k) => [
        k,
        pa[k] && pb[k] ? looser(pa[k], pb[k]) : (pa[k] ?? pb[k]),
      ]),
    );
  }
  if (a.items && b.items) merged.items = looser(a.items as JsonSchema, b.items as JsonSchema);
  // A default or a limit in words belongs to one model; list_models has each model's own.
  delete merged.default;
  return merged;
}

/**
 * The create body as one object every model's request fits: what an agent is shown. The exact
 * per-model limits are checked against the REST body schema, and list_models states them.
 */
function generationRequestProperties(): Record<string, JsonSchema> {
  const [first, ...rest] = GENERATION_REQUEST_SCHEMAS.map((s) => inlineSchema(s));
  const merged = rest.reduce(looser, first);
  const properties = merged.properties as Record<string, JsonSchema>;
  properties.model = { ...properties.model, description: 'The model; list_models describes each.' };
  properties.prompt = {
    ...properties.prompt,
    description: "What to draw. Length limits per model (Unicode code points): list_models' prompt_length.",
  };
  properties.image_reference = {
    ...properties.image_reference,
    description:
      'For image-to-image: media ids returned by upload_reference (how many a model takes: list_models). Omit for text-to-image.',
  };
  return properties;
}

const TaskIdArgument = UuidInput('The task id that generate_image returned.');

export const MAX_WAIT_SECONDS = 55;
/** Below the 60 s that MCP clients (the TypeScript SDK's default) wait for a tool call's answer. */
export const DEFAULT_WAIT_SECONDS = 45;
const WaitSeconds = (what: string) =>
  Type.Integer({
    minimum: 0,
    maximum: MAX_WAIT_SECONDS,
    description: `Seconds to wait for ${what} (default ${DEFAULT_WAIT_SECONDS}); progress notifications are sent meanwhile.`,
  });

const IdempotencyKey = Type.String({
  minLength: 1,
  maxLength: IDEMPOTENCY_KEY_MAX_LENGTH,
  pattern: IDEMPOTENCY_KEY_PATTERN,
  description:
    'Makes a retry safe: for 24 hours, the same key with the same request returns the task it created instead of creating (and charging) another.',
});

/** The arguments of generate_image that are not part of the create body. */
export const GenerateOptions = Type.Object(
  { idempotency_key: Type.Optional(IdempotencyKey), wait_seconds: Type.Optional(WaitSeconds('the image')) },
  { additionalProperties: true },
);
export type GenerateOptions = Static<typeof GenerateOptions>;

const generationInput = (extra: Record<string, JsonSchema>): JsonSchema => ({
  type: 'object',
  properties: { ...generationRequestProperties(), ...extra },
  required: ['model', 'prompt'],
  additionalProperties: false,
});

export const GetTaskArguments = Type.Object(
  { task_id: TaskIdArgument, wait_seconds: Type.Optional(WaitSeconds('the task to finish')) },
  { additionalProperties: false },
);
export const CancelTaskArguments = Type.Object({ task_id: TaskIdArgument }, { additionalProperties: false });
export const NoArguments = Type.Object({}, { additionalProperties: false });
export const UploadReferenceArguments = Type.Object(
  {
    image_base64: Type.Optional(
      Type.String({
        minLength: 1,
        description: 'The image (PNG, JPEG or WebP) as base64, or as a data: URL.',
      }),
    ),
    url: Type.Optional(
      Type.String({ minLength: 1, maxLength: 2048, description: 'An https URL of the image, fetched by the service.' }),
    ),
  },
  { additionalProperties: false, description: 'Exactly one of image_base64 and url.' },
);
export type UploadReferenceArguments = Static<typeof UploadReferenceArguments>;

const PreviewInfo = Nullable(
  Type.Object(
    {
      content_type: Type.String(),
      width: Type.Integer({ minimum: 1 }),
      height: Type.Integer({ minimum: 1 }),
      size_bytes: Type.Integer({ minimum: 1 }),
    },
    {
      description:
        'The inline `image` content item: a downscaled preview of the first result; the full size is at its url.',
    },
  ),
);
const TaskOutcome = Type.Object(
  {
    task: Type.Ref(Task),
    preview: PreviewInfo,
  },
  { additionalProperties: false },
);

export interface ToolDefinition {
  name: string;
  title: string;
  description: string;
  inputSchema: JsonSchema;
  outputSchema: JsonSchema;
  annotations: { readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint?: boolean };
}

/** The tools as tools/list publishes them; their handlers are in tools.ts. */
export const TOOL_DEFINITIONS = {
  list_models: {
    name: 'list_models',
    title: 'List models',
    description:
      'List the image models with their aspect ratios, resolutions, exact pixel sizes and price in tokens per resolution.',
    inputSchema: inlineSchema(NoArguments),
    outputSchema: inlineSchema(
      Type.Object({ models: Type.Array(Type.Ref(ModelResource)) }, { additionalProperties: false }),
    ),
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  estimate_price: {
    name: 'estimate_price',
    title: 'Estimate price',
    description:
      'Price a generate_image request in tokens and get its exact pixel size, without creating or charging anything.',
    inputSchema: generationInput({}),
    outputSchema: inlineSchema((Estimate.properties as { data: TSchema }).data),
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  generate_image: {
    name: 'generate_image',
    title: 'Generate image',
    description: `Generate an image (charged in tokens; failures and cancels are refunded) and wait up to wait_seconds (default ${DEFAULT_WAIT_SECONDS}) for it: returns the task id, price, a link to the full-size image and an inline preview, or the task id to follow with get_task. The task records its seed (parameters.seed): send it again with the same prompt and parameters to make the same image again.`,
    inputSchema: generationInput({
      idempotency_key: inlineSchema(IdempotencyKey),
      wait_seconds: inlineSchema(WaitSeconds('the image')),
    }),
    outputSchema: inlineSchema(TaskOutcome),
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  },
  get_task: {
    name: 'get_task',
    title: 'Get task',
    description:
      'Read a generation task by id, optionally waiting up to wait_seconds for it to finish; a completed task comes with its image links and a preview.',
    inputSchema: inlineSchema(GetTaskArguments),
    outputSchema: inlineSchema(TaskOutcome),
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  cancel_task: {
    name: 'cancel_task',
    title: 'Cancel task',
    description: 'Cancel a task that has not finished yet; its cost is refunded to the balance.',
    inputSchema: inlineSchema(CancelTaskArguments),
    outputSchema: inlineSchema(Type.Object({ task: Type.Ref(Task) }, { additionalProperties: false })),
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  },
  get_balance: {
    name: 'get_balance',
    title: 'Get balance',
    description: "Read the account's balance in tokens (what generate_image can still spend).",
    inputSchema: inlineSchema(NoArguments),
    outputSchema: inlineSchema(
      Type.Object(
        {
          account_id: Type.String(),
          balance: Type.Integer({ minimum: 0, description: 'Tokens available.' }),
        },
        { additionalProperties: false },
      ),
    ),
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  upload_reference: {
    name: 'upload_reference',
    title: 'Upload reference image',
    description:
      'Upload an image (base64 or an https URL) to use in generate_image image_reference for image-to-image; returns its media_id.',
    inputSchema: inlineSchema(UploadReferenceArguments),
    outputSchema: inlineSchema(MediaResource),
    annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
  },
} as const satisfies Record<string, ToolDefinition>;

export type ToolName = keyof typeof TOOL_DEFINITIONS;
