// The extension's glue under plain Node, with a stand-in for the `vscode` module that records
// what the extension asks of the editor: the commands it registers, the status bar item when
// kvlint cannot be found, and `kvlint: Render turn` from the cursor to the document it opens.
// The language client itself needs a real VS Code and is not started here.

import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as Module from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { COMMANDS, NOT_FOUND_MESSAGE } from '../kvlint';

interface Disposable {
  dispose(): void;
}

const disposable: Disposable = { dispose: () => undefined };

class FakeUri {
  constructor(
    readonly scheme: string,
    readonly path: string,
    readonly query: string,
  ) {}

  static file(file: string): FakeUri {
    return new FakeUri('file', file, '');
  }

  static from(parts: { scheme: string; path: string; query?: string }): FakeUri {
    return new FakeUri(parts.scheme, parts.path, parts.query ?? '');
  }

  get fsPath(): string {
    return this.path;
  }

  toString(): string {
    return `${this.scheme}:${encodeURI(this.path)}${this.query === '' ? '' : `?${this.query}`}`;
  }
}

interface FakeDocument {
  uri: FakeUri;
  fileName: string;
  isDirty: boolean;
  getText(): string;
  save(): Promise<boolean>;
}

interface Provider {
  provideTextDocumentContent(uri: FakeUri): string;
}

/** What the extension did to the editor. */
const editor = {
  commands: new Map<string, () => unknown>(),
  providers: new Map<string, Provider>(),
  errors: [] as string[],
  log: [] as string[],
  settings: {} as Record<string, unknown>,
  shown: [] as { document: FakeDocument; options: unknown }[],
  saved: 0,
  status: { text: '', tooltip: '', command: '', visible: false },
};

const fakeVscode = {
  version: '1.85.0',
  StatusBarAlignment: { Left: 1, Right: 2 },
  ViewColumn: { Beside: -2 },
  ProgressLocation: { Window: 10 },
  ThemeColor: class {
    constructor(readonly id: string) {}
  },
  Uri: FakeUri,
  window: {
    activeTextEditor: undefined as { document: FakeDocument; selection: { active: { line: number } } } | undefined,
    createOutputChannel: () => ({
      appendLine: (line: string) => editor.log.push(line),
      show: () => undefined,
      dispose: () => undefined,
    }),
    createStatusBarItem: () => {
      const item = {
        name: '',
        backgroundColor: undefined as unknown,
        show: () => (editor.status.visible = true),
        dispose: () => undefined,
      };
      return new Proxy(item, {
        set: (target, key, value) => {
          if (key === 'text' || key === 'tooltip' || key === 'command') {
            editor.status[key] = value as string;
          }
          return Reflect.set(target, key, value);
        },
      });
    },
    showErrorMessage: (message: string) => {
      editor.errors.push(message);
      return Promise.resolve(undefined);
    },
    withProgress: (_options: unknown, task: () => Promise<unknown>) => task(),
    showTextDocument: (document: FakeDocument, options: unknown) => {
      editor.shown.push({ document, options });
      return Promise.resolve({});
    },
  },
  workspace: {
    workspaceFolders: undefined,
    getConfiguration: (section: string) => ({
      get: (key: string, fallback: unknown) => editor.settings[`${section}.${key}`] ?? fallback,
    }),
    registerTextDocumentContentProvider: (scheme: string, provider: Provider) => {
      editor.providers.set(scheme, provider);
      return disposable;
    },
    openTextDocument: (uri: FakeUri) => {
      const provider = editor.providers.get(uri.scheme);
      assert.ok(provider !== undefined, `no content provider for ${uri.scheme}`);
      const text = provider.provideTextDocumentContent(uri);
      return Promise.resolve({ uri, fileName: uri.path, isDirty: false, getText: () => text });
    },
    getWorkspaceFolder: () => undefined,
    onDidChangeConfiguration: () => disposable,
    onDidGrantWorkspaceTrust: () => disposable,
    onDidCloseTextDocument: () => disposable,
  },
  commands: {
    registerCommand: (id: string, callback: () => unknown) => {
      editor.commands.set(id, callback);
      return disposable;
    },
    executeCommand: () => Promise.resolve(undefined),
  },
};

/** Any other part of the API: enough for vscode-languageclient to load. */
function stub(): unknown {
  const handler: ProxyHandler<() => void> = {
    get: (_target, key) => (key === 'then' ? undefined : stub()),
    apply: () => stub(),
    construct: () => stub() as object,
  };
  // A function expression, not an arrow: classes of the client extend parts of the API.
  return new Proxy(function () {
    return undefined;
  }, handler);
}

/** `api` with a stub for each part it lacks, its namespaces (window, workspace…) too. */
function withStubs<T extends object>(api: T): T {
  return new Proxy(api, {
    get: (target, key) => {
      if (!(key in target)) {
        return stub();
      }
      const value = (target as Record<string | symbol, unknown>)[key];
      const namespace = typeof value === 'object' && value !== null && value.constructor === Object;
      return namespace ? withStubs(value) : value;
    },
  });
}

const vscodeModule = withStubs(fakeVscode);

/** A stand-in for kvlint (see the file): compiled to out/test/, the fixtures are two levels up. */
const FAKE_KVLINT = path.resolve(__dirname, '..', '..', 'test-fixtures', 'fake-kvlint.js');

type Load = (request: string, parent: unknown, isMain: boolean) => unknown;
const loader = Module as unknown as { _load: Load };

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let tries = 0; tries < 200 && !condition(); tries++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.ok(condition(), `timed out waiting for ${what}`);
}

describe('the extension in a stand-in editor', function () {
  this.timeout(10_000);
  let originalLoad: Load;
  let originalPath: string | undefined;
  let root: string;
  let kvlint: string;
  let extension: typeof import('../extension');

  before(async function () {
    if (process.platform === 'win32') {
      this.skip();
    }
    root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'kvlint-extension-')));
    // Named kvlint, out of PATH: the tests set kvlint.path to it.
    kvlint = path.join(root, 'kvlint');
    fs.copyFileSync(FAKE_KVLINT, kvlint);
    fs.chmodSync(kvlint, 0o755);
    originalLoad = loader._load;
    loader._load = function (request, parent, isMain) {
      return request === 'vscode' ? vscodeModule : originalLoad.call(this, request, parent, isMain);
    };
    extension = await import('../extension');
  });

  after(async () => {
    if (extension !== undefined) {
      await extension.deactivate();
    }
    if (originalLoad !== undefined) {
      loader._load = originalLoad;
    }
    if (root !== undefined) {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('registers its commands and shows a warning when kvlint is nowhere', async () => {
    originalPath = process.env.PATH;
    process.env.PATH = path.join(root, 'nothing-here');
    try {
      extension.activate({ subscriptions: [] } as unknown as Parameters<typeof extension.activate>[0]);
      await until(() => editor.status.text !== '' && !editor.status.text.includes('sync'), 'the status');
    } finally {
      process.env.PATH = originalPath;
    }
    assert.deepEqual([...editor.commands.keys()].sort(), Object.values(COMMANDS).sort());
    assert.equal(editor.status.text, '$(warning) kvlint');
    assert.ok(editor.status.tooltip.startsWith(NOT_FOUND_MESSAGE), editor.status.tooltip);
    assert.equal(editor.status.command, COMMANDS.showOutput);
    assert.ok(editor.status.visible);
    assert.deepEqual(editor.errors, [NOT_FOUND_MESSAGE]);
  });

  it('renders the turn under the cursor into a read-only document beside the editor', async () => {
    editor.settings['kvlint.path'] = kvlint;
    const file = path.join(root, 'agent.jsonl');
    const document: FakeDocument = {
      uri: FakeUri.file(file),
      fileName: file,
      isDirty: true,
      getText: () => '{"messages": []}\n\n{"messages": []}\n{"messages": []}\n',
      save: () => {
        editor.saved += 1;
        return Promise.resolve(true);
      },
    };
    fakeVscode.window.activeTextEditor = { document, selection: { active: { line: 3 } } };
    editor.errors.length = 0;

    await editor.commands.get(COMMANDS.renderTurn)?.();

    assert.deepEqual(editor.errors, []);
    assert.equal(editor.saved, 1, 'the unsaved session is saved before kvlint reads it');
    assert.equal(editor.shown.length, 1);
    const [{ document: rendered, options }] = editor.shown;
    assert.deepEqual(JSON.parse(rendered.getText()), {
      argv: ['render', file, '--turn', '2', '--format', 'json'],
      cwd: root,
    });
    assert.equal(rendered.uri.scheme, 'kvlint-render');
    assert.equal(rendered.uri.path, '/agent.jsonl turn 2.txt');
    assert.deepEqual(options, { viewColumn: fakeVscode.ViewColumn.Beside, preview: false });
  });

  it('starts `kvlint lsp` over stdio and shows a check once the server has answered', async () => {
    const record = path.join(root, 'lsp-record.jsonl');
    editor.settings['kvlint.path'] = kvlint;
    process.env.FAKE_KVLINT_RECORD = record;
    try {
      await editor.commands.get(COMMANDS.restart)?.();
      assert.equal(editor.status.text, '$(check) kvlint');
      assert.match(editor.status.tooltip, /running/);
      await extension.deactivate();
    } finally {
      delete process.env.FAKE_KVLINT_RECORD;
    }
    // The client sends `exit` without waiting for the server to read it.
    await until(() => fs.readFileSync(record, 'utf8').includes('"exit"'), 'the exit notification');
    const lines = fs.readFileSync(record, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as unknown);
    assert.deepEqual(lines[0], { argv: ['lsp'] });
    const methods = lines.slice(1).map((line) => (line as { method: string }).method);
    assert.deepEqual(methods.slice(0, 2), ['initialize', 'initialized']);
    assert.deepEqual(methods.slice(-2), ['shutdown', 'exit']);
  });

  it('says so when the cursor is on a blank line, or the file is no session', async () => {
    const file = path.join(root, 'agent.jsonl');
    const document: FakeDocument = {
      uri: FakeUri.file(file),
      fileName: file,
      isDirty: false,
      getText: () => '{"messages": []}\n\n{"messages": []}\n',
      save: () => Promise.resolve(true),
    };
    editor.errors.length = 0;
    editor.shown.length = 0;
    fakeVscode.window.activeTextEditor = { document, selection: { active: { line: 1 } } };
    await editor.commands.get(COMMANDS.renderTurn)?.();
    fakeVscode.window.activeTextEditor = {
      document: { ...document, uri: FakeUri.file(`${root}/t.j2`), fileName: `${root}/t.j2` },
      selection: { active: { line: 0 } },
    };
    await editor.commands.get(COMMANDS.renderTurn)?.();
    assert.equal(editor.shown.length, 0);
    assert.equal(editor.errors.length, 2);
    assert.match(editor.errors[0], /line 2 is blank/);
    assert.match(editor.errors[1], /needs a session file \(\.jsonl\)/);
  });
});
