/**
 * A route's hook list with one more hook at its end, for an onRoute hook that gives some routes a
 * hook of their own instead of adding it to the whole scope. Fastify runs a route's hooks after
 * its scope's of the same kind, and a request pays nothing for hooks its route does not have.
 */
export function withRouteHook<T>(hooks: T | T[] | undefined, hook: T): T[] {
  if (hooks === undefined) return [hook];
  return Array.isArray(hooks) ? [...hooks, hook] : [hooks, hook];
}
