/**
 * Which `--flag` words each built-in command's own text can print. The CLI's refusals and hints are
 * code, not data (`new CliError(code, message, { hint })` in each command's file and the helpers it
 * calls), so this reads the source with the TypeScript parser: every string and template literal
 * of a command's `defineCommand({...})` call, and of every top-level declaration it reaches through
 * identifiers, in its own file or through relative imports (static, or `await import()` destructured).
 * Each `--word` found is a mention, with the command a `better-compute <command>` before it in the
 * same clause names, so a hint that deliberately names another command's flag is checked against
 * that command.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

/** One `--flag` a command's text holds. */
export interface FlagMention {
  /** The flag, without its dashes. */
  flag: string;
  /** The command the clause names (`better-compute auth login --url …`), when it names one. */
  namedCommand?: string;
  /** The other program the clause names (`bcd join --token-file`), whose flags are its own. */
  otherProgram?: string;
  /** Where: the file, relative to the source root, and the line. */
  where: string;
  /** The literal's text, `${…}` parts shown as `…`. */
  text: string;
}

/** A top-level declaration of a file, or a `defineCommand` call: a node of the reference graph. */
interface Unit {
  file: string;
  node: ts.Node;
}

interface ParsedFile {
  path: string;
  source: ts.SourceFile;
  /** Top-level declarations by name (`default` for `export default`). */
  declarations: Map<string, ts.Node>;
  /** Exported name → local declaration name. */
  exports: Map<string, string>;
  /** `export { a as b } from './x.js'`: exported name → the other file's export. */
  reexports: Map<string, { file: string; name: string }>;
  /** `export * from './x.js'`. */
  starExports: string[];
  /** Local name → the other file's export it stands for (`*` for a whole module). */
  imports: Map<string, { file: string; name: string }>;
}

const CLAUSE_BREAK = /[;()"`|\n]|\.(?:\s|$)|\bor\b/;

function resolveModule(from: string, specifier: string): string | undefined {
  if (!specifier.startsWith('.')) return undefined;
  const base = resolve(dirname(from), specifier.replace(/\.js$/, ''));
  for (const candidate of [`${base}.ts`, join(base, 'index.ts')]) {
    try {
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not this one
    }
  }
  return undefined;
}

/** A literal's text, its `${…}` parts as `…`; undefined for anything that is not a literal. */
function literalText(node: ts.Node): string | undefined {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (ts.isTemplateExpression(node))
    return node.head.text + node.templateSpans.map((span) => `…${span.literal.text}`).join('');
  return undefined;
}

/** The `name: '…'` of a `defineCommand({...})` call, when it is a plain literal. */
function literalCommandName(call: ts.CallExpression): string | undefined {
  if (!ts.isIdentifier(call.expression) || call.expression.text !== 'defineCommand') return undefined;
  const [definition] = call.arguments;
  if (!definition || !ts.isObjectLiteralExpression(definition)) return undefined;
  for (const property of definition.properties)
    if (
      ts.isPropertyAssignment(property) &&
      ts.isIdentifier(property.name) &&
      property.name.text === 'name' &&
      (ts.isStringLiteral(property.initializer) || ts.isNoSubstitutionTemplateLiteral(property.initializer))
    )
      return property.initializer.text;
  return undefined;
}

/**
 * The program a literal is an argument of, in `execFileSync('tar', [… '--owner=0' …])` or
 * `io.spawn(flags.ssh, [...])`: its flags are that program's. `a spawned program` when the program
 * is not a literal.
 */
function spawnedProgram(node: ts.Node): string | undefined {
  let current = node;
  while (
    current.parent &&
    (ts.isSpreadElement(current.parent) ||
      ts.isConditionalExpression(current.parent) ||
      ts.isArrayLiteralExpression(current.parent) ||
      ts.isParenthesizedExpression(current.parent))
  )
    current = current.parent;
  const call = current.parent;
  if (!call || !ts.isCallExpression(call) || call.arguments[1] !== current) return undefined;
  const callee = call.expression.getText();
  if (!/(^|\.)(execFileSync|execFile|spawnSync|spawn)$/.test(callee)) return undefined;
  const program = call.arguments[0];
  return program && ts.isStringLiteral(program) ? program.text : 'a spawned program';
}

function stripAwait(node: ts.Expression): ts.Expression {
  let current = node;
  while (ts.isAwaitExpression(current) || ts.isParenthesizedExpression(current)) current = current.expression;
  return current;
}

function dynamicImportOf(node: ts.Expression): string | undefined {
  const call = stripAwait(node);
  if (
    ts.isCallExpression(call) &&
    call.expression.kind === ts.SyntaxKind.ImportKeyword &&
    call.arguments[0] &&
    ts.isStringLiteral(call.arguments[0])
  )
    return call.arguments[0].text;
  return undefined;
}

/** The graph of a source tree: parses files on demand, follows references, collects mentions. */
export class FlagMentionScanner {
  readonly #files = new Map<string, ParsedFile>();
  readonly #root: string;
  readonly #commandNames: readonly string[];
  readonly #otherPrograms: readonly string[];

  /**
   * @param root the source folder imports are followed within
   * @param commandNames every command's name, to read `better-compute <command>` in a clause
   * @param otherPrograms programs whose flags a hint may name (`bcd`, `ssh`), never this CLI's
   */
  constructor(root: string, commandNames: readonly string[], otherPrograms: readonly string[]) {
    this.#root = root;
    // Longest first, so `sandbox exec` wins over a shorter name it starts with.
    this.#commandNames = [...commandNames].sort((a, b) => b.length - a.length);
    this.#otherPrograms = otherPrograms;
  }

  /** Every `.ts` file under `dir` that is not a test. */
  static sourceFiles(dir: string): string[] {
    return readdirSync(dir, { recursive: true, encoding: 'utf8' })
      .filter((name) => name.endsWith('.ts') && !name.endsWith('.test.ts') && !name.endsWith('.d.ts'))
      .map((name) => join(dir, name));
  }

  /** Each literal-named `defineCommand` call in `files`: the command's name and its unit. */
  literalCommands(files: readonly string[]): { name: string; unit: Unit }[] {
    const found: { name: string; unit: Unit }[] = [];
    for (const file of files) {
      const parsed = this.#parse(file);
      const visit = (node: ts.Node): void => {
        if (ts.isCallExpression(node)) {
          const name = literalCommandName(node);
          if (name) found.push({ name, unit: { file, node } });
        }
        ts.forEachChild(node, visit);
      };
      visit(parsed.source);
    }
    return found;
  }

  /** The unit of a file's export, or undefined when it is not declared in that file. */
  exportUnit(file: string, exportName: string): Unit | undefined {
    const parsed = this.#parse(file);
    const local = parsed.exports.get(exportName);
    const node = local === undefined ? undefined : parsed.declarations.get(local);
    return node ? { file, node } : undefined;
  }

  /** Whether a unit holds a literal-named `defineCommand` call (then that call is the command's unit). */
  holdsLiteralCommand(unit: Unit): boolean {
    let holds = false;
    const visit = (node: ts.Node): void => {
      if (ts.isCallExpression(node) && literalCommandName(node)) holds = true;
      else ts.forEachChild(node, visit);
    };
    visit(unit.node);
    return holds;
  }

  /** Every mention reachable from `start`, the text of other literal-named commands left out. */
  mentions(start: Unit): FlagMention[] {
    const seen = new Set<ts.Node>();
    const queue: Unit[] = [start];
    const mentions: FlagMention[] = [];
    while (queue.length > 0) {
      const unit = queue.shift()!;
      if (seen.has(unit.node)) continue;
      seen.add(unit.node);
      const parsed = this.#parse(unit.file);
      const visit = (node: ts.Node): void => {
        // Another command's definition is that command's text, checked as its own.
        if (node !== unit.node && ts.isCallExpression(node) && literalCommandName(node)) return;
        const text = literalText(node);
        if (text !== undefined && !this.#isParameterDefault(node)) {
          mentions.push(...this.#mentionsIn(text, unit.file, node));
        }
        if (ts.isIdentifier(node) && this.#isReference(node))
          queue.push(...this.#target(parsed, node, unit.node));
        if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
          const property = this.#importedProperty(node);
          const file =
            node.arguments[0] && ts.isStringLiteral(node.arguments[0])
              ? resolveModule(unit.file, node.arguments[0].text)
              : undefined;
          if (file && property) queue.push(...this.#exported(file, property));
        }
        ts.forEachChild(node, visit);
      };
      visit(unit.node);
    }
    return mentions;
  }

  #mentionsIn(text: string, file: string, node: ts.Node): FlagMention[] {
    const source = node.getSourceFile();
    const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
    const where = `${relative(this.#root, file)}:${line}`;
    const result: FlagMention[] = [];
    for (const match of text.matchAll(/(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)(?![\w-])/g)) {
      // The clause the flag stands in: back to the nearest break.
      const before = text.slice(0, match.index);
      const breaks = [...before.matchAll(new RegExp(CLAUSE_BREAK.source, 'g'))];
      const clause =
        breaks.length > 0 ? before.slice(breaks.at(-1)!.index! + breaks.at(-1)![0].length) : before;
      const mention: FlagMention = { flag: match[1]!, where, text };
      const named = /\bbetter-compute ((?:[a-z][a-z0-9-]* ?){1,3})/g;
      let last: RegExpExecArray | null = null;
      for (let m = named.exec(clause); m; m = named.exec(clause)) last = m;
      if (last) {
        const words = last[1]!.trim();
        const command = this.#commandNames.find((name) => words === name || words.startsWith(`${name} `));
        if (command) mention.namedCommand = command;
      }
      const program = this.#otherPrograms.find((name) =>
        new RegExp(`(?:^|[\\s'"\`])${name.replace(/[-.]/g, '\\$&')} `).test(clause),
      );
      if (program && !(last && clause.lastIndexOf(last[0]) > clause.lastIndexOf(`${program} `)))
        mention.otherProgram = program;
      const spawned = spawnedProgram(node);
      if (spawned) mention.otherProgram = spawned;
      // A script the command writes out (the node installer) has flags of its own.
      if (text.startsWith('#!')) mention.otherProgram = text.slice(2, text.indexOf('\n')).trim();
      result.push(mention);
    }
    return result;
  }

  // `flag = '--out'`: a default argument is a value, not something printed as it stands.
  #isParameterDefault(node: ts.Node): boolean {
    return ts.isParameter(node.parent) && node.parent.initializer === node;
  }

  #isReference(node: ts.Identifier): boolean {
    const parent = node.parent;
    if (ts.isPropertyAccessExpression(parent) && parent.name === node) return false;
    if (ts.isPropertyAssignment(parent) && parent.name === node) return false;
    if ((ts.isPropertySignature(parent) || ts.isMethodDeclaration(parent)) && parent.name === node)
      return false;
    if (ts.isBindingElement(parent) && parent.propertyName === node) return false;
    return true;
  }

  /**
   * The units a name used inside `within` stands for: a declaration of its file, or an import; of a
   * whole module (`import * as m`, `const m = await import(…)`), only the `m.name` read.
   */
  #target(parsed: ParsedFile, identifier: ts.Identifier, within: ts.Node): Unit[] {
    const local = parsed.declarations.get(identifier.text);
    if (local && local !== within) return [{ file: parsed.path, node: local }];
    const imported = parsed.imports.get(identifier.text);
    if (!imported) return [];
    if (imported.name !== '*') return this.#exported(imported.file, imported.name);
    const parent = identifier.parent;
    return ts.isPropertyAccessExpression(parent) && parent.expression === identifier
      ? this.#exported(imported.file, parent.name.text)
      : [];
  }

  /** The declaration behind a file's export, through re-exports; every one for `*`. */
  #exported(file: string, name: string, depth = 0): Unit[] {
    if (depth > 8 || !file.startsWith(this.#root)) return [];
    const parsed = this.#parse(file);
    if (name === '*') return [...parsed.declarations.values()].map((node) => ({ file, node }));
    const local = parsed.exports.get(name);
    const node = local === undefined ? undefined : parsed.declarations.get(local);
    if (node) return [{ file, node }];
    const re = parsed.reexports.get(name);
    if (re) return this.#exported(re.file, re.name, depth + 1);
    return parsed.starExports.flatMap((other) => this.#exported(other, name, depth + 1));
  }

  /** `(await import('./x.js')).name`: the property read off a dynamic import, if that is its shape. */
  #importedProperty(call: ts.CallExpression): string | undefined {
    let node: ts.Node = call;
    while (ts.isAwaitExpression(node.parent) || ts.isParenthesizedExpression(node.parent)) node = node.parent;
    if (ts.isPropertyAccessExpression(node.parent) && node.parent.expression === node)
      return node.parent.name.text;
    return undefined;
  }

  #parse(path: string): ParsedFile {
    const cached = this.#files.get(path);
    if (cached) return cached;
    const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true);
    const parsed: ParsedFile = {
      path,
      source,
      declarations: new Map(),
      exports: new Map(),
      reexports: new Map(),
      starExports: [],
      imports: new Map(),
    };
    const exported = (node: ts.Node) =>
      ts.canHaveModifiers(node) &&
      (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
    const isDefault = (node: ts.Node) =>
      ts.canHaveModifiers(node) &&
      (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.DefaultKeyword);
    for (const statement of source.statements) {
      if (ts.isImportDeclaration(statement) && ts.isStringLiteral(statement.moduleSpecifier)) {
        const file = resolveModule(path, statement.moduleSpecifier.text);
        const clause = statement.importClause;
        if (!file || !clause || clause.isTypeOnly) continue;
        if (clause.name) parsed.imports.set(clause.name.text, { file, name: 'default' });
        const bindings = clause.namedBindings;
        if (bindings && ts.isNamespaceImport(bindings))
          parsed.imports.set(bindings.name.text, { file, name: '*' });
        if (bindings && ts.isNamedImports(bindings))
          for (const element of bindings.elements)
            if (!element.isTypeOnly)
              parsed.imports.set(element.name.text, {
                file,
                name: (element.propertyName ?? element.name).text,
              });
        continue;
      }
      if (ts.isExportDeclaration(statement)) {
        const file =
          statement.moduleSpecifier && ts.isStringLiteral(statement.moduleSpecifier)
            ? resolveModule(path, statement.moduleSpecifier.text)
            : undefined;
        if (!statement.exportClause) {
          if (file) parsed.starExports.push(file);
        } else if (ts.isNamedExports(statement.exportClause)) {
          for (const element of statement.exportClause.elements) {
            const from = (element.propertyName ?? element.name).text;
            if (file) parsed.reexports.set(element.name.text, { file, name: from });
            else parsed.exports.set(element.name.text, from);
          }
        }
        continue;
      }
      if (ts.isExportAssignment(statement)) {
        parsed.declarations.set('default', statement);
        parsed.exports.set('default', 'default');
        continue;
      }
      if ((ts.isFunctionDeclaration(statement) || ts.isClassDeclaration(statement)) && statement.name) {
        parsed.declarations.set(statement.name.text, statement);
        if (exported(statement))
          parsed.exports.set(isDefault(statement) ? 'default' : statement.name.text, statement.name.text);
        continue;
      }
      if (ts.isVariableStatement(statement)) {
        for (const declaration of statement.declarationList.declarations) {
          if (ts.isIdentifier(declaration.name)) {
            parsed.declarations.set(declaration.name.text, declaration);
            if (exported(statement)) parsed.exports.set(declaration.name.text, declaration.name.text);
          }
        }
      }
    }
    // `const { a } = await import('./x.js')` and `const [{ a }, { b }] = await Promise.all([import…])`
    // anywhere in the file: the names stand for those exports.
    const visit = (node: ts.Node): void => {
      if (ts.isVariableDeclaration(node) && node.initializer) {
        const pairs: [ts.BindingName, ts.Expression][] = [];
        const init = stripAwait(node.initializer);
        if (dynamicImportOf(init) !== undefined) pairs.push([node.name, init]);
        else if (
          ts.isCallExpression(init) &&
          ts.isPropertyAccessExpression(init.expression) &&
          init.expression.getText(source) === 'Promise.all' &&
          init.arguments[0] &&
          ts.isArrayLiteralExpression(init.arguments[0]) &&
          ts.isArrayBindingPattern(node.name)
        )
          node.name.elements.forEach((element, i) => {
            const item = (init.arguments[0] as ts.ArrayLiteralExpression).elements[i];
            if (item && ts.isBindingElement(element)) pairs.push([element.name, item]);
          });
        for (const [name, expression] of pairs) {
          const specifier = dynamicImportOf(expression);
          const file = specifier === undefined ? undefined : resolveModule(path, specifier);
          if (!file) continue;
          if (ts.isIdentifier(name)) parsed.imports.set(name.text, { file, name: '*' });
          else if (ts.isObjectBindingPattern(name))
            for (const element of name.elements)
              if (ts.isIdentifier(element.name))
                parsed.imports.set(element.name.text, {
                  file,
                  name: (element.propertyName && ts.isIdentifier(element.propertyName)
                    ? element.propertyName
                    : element.name
                  ).text,
                });
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
    this.#files.set(path, parsed);
    return parsed;
  }
}
