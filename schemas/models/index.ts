import type { ModelModule } from '../model-entry.js';
import { alphaPro } from './alpha-pro.js';
import { betaV5Pro } from './beta-v5-pro.js';

/**
 * The one list of model modules, in catalog order. Everything that names the models is built from
 * it: the catalog and GET /api/v1/models, the request schemas and the create body's `oneOf`, the
 * OpenAPI document, the per-model configuration variables and the CLI's price table and config help.
 * A new model is a module beside these and one entry here (docs/design.md §7.3).
 */
export const MODEL_MODULES = [alphaPro, betaV5Pro] as const satisfies readonly ModelModule[];
