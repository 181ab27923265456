import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import t from 'tap';
import ts from 'typescript';

/**
 * The layering rules of docs/design.md §7.1, read from the source with the TypeScript parser: what
 * each file imports (static, dynamic and type-only alike), and which errors it constructs.
 */
const root = resolve(new URL('..', import.meta.url).pathname);

function sourceFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts'))
    .map((name) => join(dir, name));
}

interface Parsed {
  path: string;
  /** Imported modules, as paths relative to the repository (bare package names as written). */
  imports: { module: string; names: string[] }[];
  /** Classes constructed with `new`, by the name written. */
  constructed: string[];
  /** Classes declared to extend another, by the name written. */
  extended: string[];
}

function parse(path: string, text: string): Parsed {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const parsed: Parsed = { path, imports: [], constructed: [], extended: [] };
  const resolveModule = (specifier: string) =>
    specifier.startsWith('.') ? relative(root, resolve(root, dirname(path), specifier)) : specifier;
  const visit = (node: ts.Node) => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier) {
      const names: string[] = [];
      const clause = ts.isImportDeclaration(node) ? node.importClause : undefined;
      if (clause?.name) names.push(clause.name.text);
      const bindings = clause?.namedBindings;
      if (bindings && ts.isNamedImports(bindings))
        for (const element of bindings.elements) names.push(element.name.text);
      parsed.imports.push({ module: resolveModule((node.moduleSpecifier as ts.StringLiteral).text), names });
    }
    if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [argument] = node.arguments;
      if (argument && ts.isStringLiteral(argument))
        parsed.imports.push({ module: resolveModule(argument.text), names: [] });
    }
    if (ts.isNewExpression(node)) parsed.constructed.push(node.expression.getText(source));
    if (ts.isClassDeclaration(node))
      for (const clause of node.heritageClauses ?? [])
        for (const type of clause.types) parsed.extended.push(type.expression.getText(source));
    ts.forEachChild(node, visit);
  };
  visit(source);
  return parsed;
}

const parseFile = (path: string) => parse(path, readFileSync(join(root, path), 'utf8'));

/** The imports of `file` that reach into `layer` (a folder of the repository). */
const importsInto = (file: Parsed, layer: string) =>
  file.imports.filter((i) => i.module === layer || i.module.startsWith(`${layer}/`)).map((i) => i.module);

/** The domain errors a file makes itself: `new` of the core's error classes, or a class of its own extending one. */
function domainErrorsMade(file: Parsed): string[] {
  const errorClasses = new Set(
    file.imports.filter((i) => i.module.startsWith('src/core/errors')).flatMap((i) => i.names),
  );
  errorClasses.add('DomainError');
  return [
    ...file.constructed.filter((name) => errorClasses.has(name)).map((name) => `new ${name}`),
    ...file.extended.filter((name) => errorClasses.has(name)).map((name) => `extends ${name}`),
  ];
}

t.test('the checks see what they look for (a file that breaks each rule is caught)', async (t) => {
  const route = parse(
    'src/http/routes/example.ts',
    "import type { Store } from '../../store/port.js';\nconst m = await import('../../store/sqlite/tasks.js');",
  );
  t.same(importsInto(route, 'src/store'), ['src/store/port.js', 'src/store/sqlite/tasks.js']);
  const adapter = parse(
    'src/store/sqlite/example.ts',
    "import { DomainError as E } from '../../core/errors.js';\nclass Own extends E {}\nthrow new E('x', 'y');",
  );
  t.same(domainErrorsMade(adapter), ['new E', 'extends E']);
  const clean = parse(
    'src/store/sqlite/example.ts',
    "import { notFound } from '../../core/errors.js';\nthrow notFound('Task');\nthrow new Error('fault');",
  );
  t.same(domainErrorsMade(clean), [], "a core factory's error, or a plain fault, is not the adapter's own");
});

t.test('no route imports the store: routes reach data through services', async (t) => {
  for (const path of sourceFiles('src/http/routes'))
    t.same(importsInto(parseFile(path), 'src/store'), [], `${path} imports nothing of src/store`);
});

t.test('nothing else in src/http imports the store: plugins too reach data through services', async (t) => {
  // buildApp and buildAppServices are the wiring: they are handed the adapters and build the services.
  const wiring = new Set(['src/http/app.ts', 'src/http/app-services.ts']);
  const checked = sourceFiles('src/http').filter((path) => !path.startsWith('src/http/routes/') && !wiring.has(path));
  t.ok(checked.includes('src/http/plugins/auth.ts'), 'the plugins are among the files checked');
  for (const path of checked)
    t.same(importsInto(parseFile(path), 'src/store'), [], `${path} imports nothing of src/store`);
});

t.test('no store adapter makes a domain error: refusals come from the core', async (t) => {
  for (const path of sourceFiles('src/store'))
    t.same(domainErrorsMade(parseFile(path)), [], `${path} throws only the core's errors`);
});

t.test('the core imports only the contract and itself', async (t) => {
  for (const path of sourceFiles('src/core')) {
    const outside = parseFile(path)
      .imports.map((i) => i.module)
      .filter((module) => !module.startsWith('src/core/') && !module.startsWith('schemas/'));
    t.same(outside, [], `${path} imports only src/core and schemas`);
  }
});

t.test('services import no layer above them (http, worker)', async (t) => {
  for (const path of sourceFiles('src/services')) {
    const file = parseFile(path);
    t.same([...importsInto(file, 'src/http'), ...importsInto(file, 'src/worker')], [], `${path} imports downward only`);
  }
});

t.test('the MCP tools import nothing of src/http: both faces share the contract module and the services', async (t) => {
  const files = sourceFiles('src/mcp');
  t.ok(files.length >= 4, `${files.length} files checked`);
  for (const path of files) {
    const file = parseFile(path);
    t.same(
      [...importsInto(file, 'src/http'), ...importsInto(file, 'src/store')],
      [],
      `${path} imports no http or store`,
    );
  }
});

t.test('the contract module belongs to no face: it imports no http, mcp, store or worker', async (t) => {
  for (const path of sourceFiles('src/contract')) {
    const file = parseFile(path);
    const faces = ['src/http', 'src/mcp', 'src/store', 'src/worker'].flatMap((layer) => importsInto(file, layer));
    t.same(faces, [], `${path} imports downward only`);
  }
});

t.test('no face holds an Idempotency-Key itself: the creates hand theirs to the one create', async (t) => {
  // The idempotency plugin (src/http/plugins) settles the keys of the routes that change one record.
  const faces = [...sourceFiles('src/http/routes'), ...sourceFiles('src/mcp')];
  for (const path of faces) {
    const held = parseFile(path)
      .imports.filter((i) => i.module.startsWith('src/services/idempotency'))
      .flatMap((i) => i.names)
      .filter((name) => /IdempotencyService|HeldIdempotencyKey/.test(name));
    t.same(held, [], `${path} neither claims, renews nor releases a key`);
  }
});
