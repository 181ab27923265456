/**
 * Parameter placeholders that SQLite's query planner does not look into.
 *
 * When SQLite plans a statement, it reads the value bound to a parameter compared with `=` (the
 * row estimate of a term an index does not cover, for every index it weighs) and marks the statement
 * to be compiled again as soon as that parameter is bound anew. A cached statement of that shape is
 * then parsed and planned on every run, which costs more than running it: the task list's page
 * 250 → 97 µs, the claim's candidates 33 → 4 µs, the ledger's next number 8.5 → 1.8 µs
 * (docs/performance-history.md, "Statements compiled on every run"). better-sqlite3 offers no way to turn this
 * off for the connection (SQLite's SQLITE_DBCONFIG_ENABLE_QPSG). A CAST is an expression the
 * planner does not evaluate, so the statement keeps its plan; the compared value is the same, since
 * the value bound is of the cast's type already.
 *
 * Used where a statement on a hot path compares bound values outside a primary key or unique
 * index lookup (which SQLite plans without weighing indexes).
 */
export const textParameter = (placeholder: string): string => `CAST(${placeholder} AS TEXT)`;

export const integerParameter = (placeholder: string): string => `CAST(${placeholder} AS INTEGER)`;

/** textParameter of the named parameter `@name` (newestFirstKeyset's placeholder). */
export const namedTextParameter = (name: string): string => textParameter(`@${name}`);
