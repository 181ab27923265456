import { Type, type TUnsafe } from '@sinclair/typebox';
import { PIXEL_SIZES, type AspectRatio, type Resolution } from './pixel-sizes.js';
import { outputFormatProperties } from './output-format.js';
import { EXAMPLE_MEDIA_ID, UuidInput } from './primitives.js';

/** What a model module declares; everything else about the model is derived from it. */
export interface ModelDefinition<Id extends string = string> {
  id: Id;
  description: string;
  promptLength: { min: number; max: number };
  imageReferenceCount: { min: number; max: number };
  aspectRatios: readonly AspectRatio[];
  /** Token price per offered resolution; a resolution not listed here is not offered. */
  prices: Readonly<Partial<Record<Resolution, number>>>;
  defaults: { aspectRatio: AspectRatio; resolution: Resolution };
}

export interface ModelCatalogEntry<Id extends string = string> extends ModelDefinition<Id> {
  resolutions: readonly Resolution[];
  /** pixelSizes[ratio][resolution] = { width, height } for exactly what the model offers. */
  pixelSizes: Readonly<Record<string, Readonly<Record<string, { width: number; height: number }>>>>;
}

const RESOLUTION_ORDER: readonly Resolution[] = ['1K', '2K', '4K'];

export function defineModel<Id extends string>(definition: ModelDefinition<Id>): ModelCatalogEntry<Id> {
  const resolutions = RESOLUTION_ORDER.filter((r) => definition.prices[r] !== undefined);
  const pixelSizes: Record<string, Record<string, { width: number; height: number }>> = {};
  for (const ratio of definition.aspectRatios) {
    pixelSizes[ratio] = {};
    for (const resolution of resolutions) {
      const [width, height] = PIXEL_SIZES[ratio][resolution];
      pixelSizes[ratio][resolution] = { width, height };
    }
  }
  return { ...definition, resolutions, pixelSizes };
}

/**
 * A string enum as a plain JSON Schema `enum`: Ajv then reports one `enum` error with the allowed
 * values, where a union of literals would report one error per branch.
 */
export function StringEnum<T extends string>(values: readonly T[], options: Record<string, unknown> = {}): TUnsafe<T> {
  return Type.Unsafe<T>({ type: 'string', enum: [...values], ...options });
}

/**
 * Text with at least one character that is not whitespace, and no U+0000 (which PostgreSQL's text
 * type cannot hold, and which means nothing to a model). Linear: each star stops at the one
 * character class between them. A lone UTF-16 surrogate (not text: it has no UTF-8 form) is refused
 * where a JSON body is read (src/http/json-body.ts), not here: a pattern that names the surrogate
 * range is one that schema-driven generators cannot produce strings for.
 */
export const NON_BLANK_PATTERN = '^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$';

/** The largest seed: seeds are unsigned 32-bit integers (0 to 4 294 967 295). */
export const SEED_MAX = 4_294_967_295;

export const SEED_DESCRIPTION =
  'The seed of the generation, 0 to 4294967295: the same prompt, parameters and seed make the same image on the ' +
  'preview renderer, and are passed to the backends that take a seed. Without one a seed is drawn; the task records it.';

export const Seed = (description = SEED_DESCRIPTION) =>
  Type.Integer({ format: 'int64', minimum: 0, maximum: SEED_MAX, description });

export const WebhookUrl = Type.String({
  minLength: 1,
  maxLength: 2048,
  format: 'uri',
  // The scheme in either case; the rest (userinfo, port, address) is checked when it is read.
  pattern: '^[Hh][Tt][Tt][Pp][Ss]?://[^\\s]+$',
  description:
    'Absolute https URL that receives a signed event when the task reaches a terminal state (http only where the server allows it); no userinfo, a public address, port 80, 443 or 1024-65535.',
});

/**
 * The create/estimate request body of one model. Every per-model limit is a JSON Schema keyword
 * so that Ajv reports the offending field; `additionalProperties: false` rejects unknown fields.
 */
export function buildGenerationRequestSchema<Id extends string>(entry: ModelCatalogEntry<Id>) {
  const schemaId = generationRequestSchemaId(entry.id);
  return Type.Object(
    {
      model: Type.Literal(entry.id),
      prompt: Type.String({
        minLength: entry.promptLength.min,
        maxLength: entry.promptLength.max,
        // JSON can carry a U+0000, which no store can keep as sent; a prompt of whitespace alone
        // asks for nothing and is not charged.
        pattern: NON_BLANK_PATTERN,
        description: `Text prompt, ${entry.promptLength.min} to ${entry.promptLength.max} Unicode code points, not whitespace alone.`,
      }),
      image_reference: Type.Optional(
        Type.Array(UuidInput('A media_id returned by POST /api/v1/media (either case).'), {
          minItems: entry.imageReferenceCount.min,
          maxItems: entry.imageReferenceCount.max,
          description: `Image-to-image references, ${entry.imageReferenceCount.min} to ${entry.imageReferenceCount.max}. Omit for text-to-image.`,
        }),
      ),
      parameters: Type.Optional(
        Type.Object(
          {
            aspect_ratio: Type.Optional(
              StringEnum(entry.aspectRatios, {
                default: entry.defaults.aspectRatio,
                description: 'Aspect ratio of the output.',
              }),
            ),
            resolution: Type.Optional(
              StringEnum(entry.resolutions, {
                default: entry.defaults.resolution,
                description: 'Output resolution; decides the price.',
              }),
            ),
            ...outputFormatProperties(),
            seed: Type.Optional(Seed()),
          },
          { additionalProperties: false },
        ),
      ),
      webhook_url: Type.Optional(WebhookUrl),
    },
    { $id: schemaId, additionalProperties: false, title: schemaId, description: `Generation request for ${entry.id}.` },
  );
}

/**
 * A model's one module (`schemas/models/<id>.ts`): its catalog entry (limits, ratios, prices, pixel
 * sizes), its request schema and the names of its configuration variables. Listed once in
 * `schemas/models/index.ts`; the catalog, the create body, the OpenAPI document and the
 * configuration schema are all built from that list, so a new model is one module and one line.
 */
export function defineModelModule<Id extends string>(definition: ModelDefinition<Id>) {
  // The id becomes a URL segment, a schema component name and environment variable names.
  if (!/^[a-z0-9]+([-.][a-z0-9]+)*$/.test(definition.id)) {
    throw new Error(`Model id ${JSON.stringify(definition.id)}: lower-case letters and digits, joined by - or .`);
  }
  const entry = defineModel(definition);
  const prefix = configurationPrefixOf(entry.id);
  return {
    entry,
    requestSchema: buildGenerationRequestSchema(entry),
    /** Its environment variables, named from its id so that no model's name can drift from its variables. */
    configuration: {
      backendVariable: `${prefix}_BACKEND` as const,
      upstreamModelVariable: `${prefix}_UPSTREAM_MODEL` as const,
    },
  };
}

export type ModelModule<Id extends string = string> = ReturnType<typeof defineModelModule<Id>>;

/** `alpha-pro` → `ALPHA_PRO`, as a type too, so that `config.ALPHA_PRO_BACKEND` is checked by the compiler. */
type ConfigurationPrefix<Id extends string> = Id extends `${infer Head}-${infer Tail}`
  ? `${Uppercase<Head>}_${ConfigurationPrefix<Tail>}`
  : Id extends `${infer Head}.${infer Tail}`
    ? `${Uppercase<Head>}_${ConfigurationPrefix<Tail>}`
    : Uppercase<Id>;

function configurationPrefixOf<Id extends string>(id: Id): ConfigurationPrefix<Id> {
  return id.toUpperCase().replace(/[-.]/g, '_') as ConfigurationPrefix<Id>;
}

/** The component name of a model's request schema, e.g. GenerationRequest_alpha_pro. */
export function generationRequestSchemaId(modelId: string): string {
  return `GenerationRequest_${modelId.replace(/[^A-Za-z0-9]/g, '_')}`;
}

export interface NamedExample {
  summary: string;
  description?: string;
  value: unknown;
}

/**
 * Request examples of one model, named for OpenAPI: a text-to-image request that succeeds as it
 * stands (Swagger UI pre-fills the first), and an image-to-image request whose reference is a
 * placeholder to replace with the media_id of an upload.
 */
export function generationRequestExamples(entry: ModelCatalogEntry): Record<string, NamedExample> {
  const ratio = entry.aspectRatios.includes('16:9') ? '16:9' : entry.defaults.aspectRatio;
  return {
    [`${entry.id}-text-to-image`]: {
      summary: `${entry.id}: text-to-image (${ratio}, ${entry.defaults.resolution}, ${entry.prices[entry.defaults.resolution]} tokens)`,
      value: {
        model: entry.id,
        prompt: 'A lighthouse on a rocky coast at dawn, watercolour',
        parameters: { aspect_ratio: ratio, resolution: entry.defaults.resolution },
      },
    },
    [`${entry.id}-image-to-image`]: {
      summary: `${entry.id}: image-to-image (upload first; replace the placeholder media_id)`,
      description:
        `\`${EXAMPLE_MEDIA_ID}\` is a placeholder, not a real upload: first upload an image with ` +
        '`POST /api/v1/media` and put the `media_id` it returns here, or the request is refused (422 `invalid_media_reference`).',
      value: {
        model: entry.id,
        prompt: 'The same scene at night, lit by the lighthouse beam',
        image_reference: [EXAMPLE_MEDIA_ID],
        parameters: { aspect_ratio: entry.defaults.aspectRatio, resolution: entry.defaults.resolution },
      },
    },
  };
}
