// The kvlint extension: runs the language server `kvlint lsp` over stdio for prompt templates,
// chat templates and recorded sessions, shows its state in the status bar, and renders the turn
// under the cursor of a session file with `kvlint render`.

import * as path from 'node:path';
import * as vscode from 'vscode';
import { LanguageClient, LanguageClientOptions, ServerOptions, State } from 'vscode-languageclient/node';
import {
  COMMANDS,
  CONFIG_FILE_PATTERNS,
  DOCUMENT_PATTERNS,
  Resolution,
  renderArgs,
  renderTitle,
  resolveExecutable,
  runRender,
  turnAtLine,
} from './kvlint';

/** The scheme of the read-only documents that show rendered turns. */
const RENDER_SCHEME = 'kvlint-render';

/** How long the language server may take to answer `initialize`. */
const START_TIMEOUT_MS = 30_000;

let server: Server | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel('kvlint');
  const status = vscode.window.createStatusBarItem('kvlint-status', vscode.StatusBarAlignment.Right, 100);
  status.name = 'kvlint';
  status.command = COMMANDS.showOutput;
  const renders = new RenderedTurns();
  server = new Server(output, status);
  context.subscriptions.push(
    output,
    status,
    renders,
    server,
    vscode.workspace.registerTextDocumentContentProvider(RENDER_SCHEME, renders),
    vscode.commands.registerCommand(COMMANDS.showOutput, () => output.show(true)),
    vscode.commands.registerCommand(COMMANDS.restart, () => server?.restart()),
    vscode.commands.registerCommand(COMMANDS.renderTurn, () => renderTurn(output, renders)),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration('kvlint.path')) {
        void server?.restart();
      }
    }),
    // A trusted workspace may name its own executable in kvlint.path.
    vscode.workspace.onDidGrantWorkspaceTrust(() => void server?.restart()),
  );
  // Not awaited: a server slow to answer must not hold up the activation, and with it the
  // commands (`kvlint: Restart server` among them).
  void server.restart();
}

export async function deactivate(): Promise<void> {
  await server?.stop();
  server = undefined;
}

/** The folder a relative `kvlint.path` is taken from: the first workspace folder on disk. */
function baseFolder(): string | undefined {
  const folder = vscode.workspace.workspaceFolders?.find((candidate) => candidate.uri.scheme === 'file');
  return folder?.uri.fsPath;
}

/** The kvlint executable from the `kvlint.path` setting, else from PATH. */
function kvlintExecutable(): Resolution {
  const setting = vscode.workspace.getConfiguration('kvlint').get<string>('path', '');
  return resolveExecutable(setting, process.env, process.platform, baseFolder());
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The language client, restarted on demand, and the status bar item that shows its state. */
class Server implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private watchers: vscode.FileSystemWatcher[] = [];
  /** Starts and stops run one after the other. */
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly output: vscode.OutputChannel,
    private readonly status: vscode.StatusBarItem,
  ) {}

  restart(): Promise<void> {
    return this.enqueue(async () => {
      await this.stopClient();
      await this.startClient();
    });
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.stopClient());
  }

  dispose(): void {
    void this.stop();
  }

  private enqueue(step: () => Promise<void>): Promise<void> {
    const run = this.queue.then(step);
    this.queue = run.catch((error: unknown) => this.output.appendLine(describe(error)));
    return run;
  }

  private async startClient(): Promise<void> {
    const executable = kvlintExecutable();
    if (!executable.ok) {
      this.output.appendLine(executable.message);
      this.showFailed(executable.message);
      void this.offerHelp(executable.message);
      return;
    }
    this.showStarting();
    this.watchers = CONFIG_FILE_PATTERNS.map((pattern) => vscode.workspace.createFileSystemWatcher(pattern));
    const serverOptions: ServerOptions = { command: executable.path, args: ['lsp'] };
    const clientOptions: LanguageClientOptions = {
      documentSelector: DOCUMENT_PATTERNS.map((pattern) => ({ scheme: 'file', pattern })),
      synchronize: { fileEvents: this.watchers },
      outputChannel: this.output,
    };
    // The id `kvlint` makes the client read its trace level from `kvlint.trace.server`.
    const client = new LanguageClient('kvlint', 'kvlint language server', serverOptions, clientOptions);
    this.client = client;
    client.onDidChangeState(({ newState }) => {
      if (this.client !== client) {
        return;
      }
      if (newState === State.Running) {
        this.showRunning(executable.path);
      } else if (newState === State.Starting) {
        this.showStarting();
      } else {
        this.showFailed('The kvlint language server stopped: see the output for why.');
      }
    });
    this.output.appendLine(`Starting ${executable.path} lsp`);
    let timer: NodeJS.Timeout | undefined;
    // A server that never answers must not hold up the restarts queued behind it.
    const timedOut = new Promise<'timed out'>((resolve) => {
      timer = setTimeout(() => resolve('timed out'), START_TIMEOUT_MS);
    });
    try {
      if ((await Promise.race([client.start(), timedOut])) === 'timed out') {
        const message = `The kvlint language server (${executable.path} lsp) did not answer within ${START_TIMEOUT_MS / 1000} s.`;
        this.output.appendLine(message);
        this.showFailed(message);
      } else {
        this.showRunning(executable.path);
      }
    } catch (error) {
      const message = `The kvlint language server (${executable.path} lsp) failed to start: ${describe(error)}`;
      this.output.appendLine(message);
      this.showFailed(message);
    } finally {
      clearTimeout(timer);
    }
  }

  private async stopClient(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    for (const watcher of this.watchers.splice(0)) {
      watcher.dispose();
    }
    if (client === undefined) {
      return;
    }
    const failed = (error: unknown): void => {
      this.output.appendLine(`Stopping the kvlint language server: ${describe(error)}`);
    };
    try {
      if (client.state === State.Starting) {
        // A client cannot be stopped while it starts: stop it as soon as it has started.
        const later = client.onDidChangeState(({ newState }) => {
          if (newState !== State.Starting) {
            later.dispose();
            if (newState === State.Running) {
              client.stop().catch(failed);
            }
          }
        });
      } else if (client.needsStop()) {
        await client.stop();
      }
    } catch (error) {
      failed(error);
    }
  }

  private async offerHelp(message: string): Promise<void> {
    const settings = 'Open Settings';
    const choice = await vscode.window.showErrorMessage(message, settings);
    if (choice === settings) {
      await vscode.commands.executeCommand('workbench.action.openSettings', 'kvlint.path');
    }
  }

  private showStarting(): void {
    this.status.text = '$(sync~spin) kvlint';
    this.status.tooltip = 'kvlint: starting the language server';
    this.status.backgroundColor = undefined;
    this.status.show();
  }

  private showRunning(executable: string): void {
    this.status.text = '$(check) kvlint';
    this.status.tooltip = `kvlint language server running (${executable}). Click to show its output.`;
    this.status.backgroundColor = undefined;
    this.status.show();
  }

  private showFailed(message: string): void {
    this.status.text = '$(warning) kvlint';
    this.status.tooltip = `${message} Click to show the output.`;
    this.status.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
    this.status.show();
  }
}

/** The texts of rendered turns, shown as read-only documents that are never saved. */
class RenderedTurns implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly texts = new Map<string, string>();
  private count = 0;
  private readonly closing = vscode.workspace.onDidCloseTextDocument((document) => {
    this.texts.delete(document.uri.toString());
  });

  add(title: string, text: string): vscode.Uri {
    this.count += 1;
    const uri = vscode.Uri.from({ scheme: RENDER_SCHEME, path: `/${title}`, query: String(this.count) });
    this.texts.set(uri.toString(), text);
    return uri;
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? 'This rendered turn is gone: run "kvlint: Render turn" again.';
  }

  dispose(): void {
    this.closing.dispose();
    this.texts.clear();
  }
}

/** `kvlint: Render turn`: the prompt the engine prefills for the turn under the cursor. */
async function renderTurn(output: vscode.OutputChannel, renders: RenderedTurns): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  const document = editor?.document;
  if (editor === undefined || document === undefined || document.uri.scheme !== 'file' || path.extname(document.fileName) !== '.jsonl') {
    void vscode.window.showErrorMessage('kvlint: Render turn needs a session file (.jsonl) open in the editor.');
    return;
  }
  const line = editor.selection.active.line;
  const turn = turnAtLine(document.getText(), line);
  if (turn === undefined) {
    void vscode.window.showErrorMessage(
      `kvlint: line ${line + 1} is blank: put the cursor on a request (one JSON request per line).`,
    );
    return;
  }
  if (document.isDirty && !(await document.save())) {
    void vscode.window.showErrorMessage(`kvlint: ${document.fileName} could not be saved, so it was not rendered.`);
    return;
  }
  const executable = kvlintExecutable();
  if (!executable.ok) {
    void vscode.window.showErrorMessage(executable.message);
    return;
  }
  const file = document.uri.fsPath;
  // Run where `kvlint check` would be run, so that kvlint.toml is found the same way.
  const cwd = vscode.workspace.getWorkspaceFolder(document.uri)?.uri.fsPath ?? path.dirname(file);
  const args = renderArgs(file, turn);
  output.appendLine(`Running ${executable.path} ${args.join(' ')}`);
  const result = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Window, title: `kvlint: rendering turn ${turn}` },
    () => runRender(executable.path, args, cwd),
  );
  if (!result.ok) {
    output.appendLine(result.message);
    void vscode.window.showErrorMessage(`kvlint render: ${result.message}`);
    return;
  }
  const rendered = await vscode.workspace.openTextDocument(renders.add(renderTitle(file, turn), result.text));
  await vscode.window.showTextDocument(rendered, { viewColumn: vscode.ViewColumn.Beside, preview: false });
}
