// The extension's logic that needs no editor: finding the kvlint executable, the turn under the
// cursor in a session file, the `kvlint render` command line and reading its JSON report.
// It does not import `vscode`, so its tests run under plain Node. The `platform` parameters
// choose the conventions of PATH (its delimiter, PATHEXT, execute bits); files are looked up
// with this machine's own path functions.

import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** The commands the extension registers (each one is contributed in package.json). */
export const COMMANDS = {
  restart: 'kvlint.restart',
  renderTurn: 'kvlint.renderTurn',
  showOutput: 'kvlint.showOutput',
} as const;

/** The files the language server checks: prompt templates, chat templates, recorded sessions. */
export const DOCUMENT_PATTERNS = [
  '**/*.{j2,jinja,jinja2,mustache,hbs,prompt,prompty,jsonl}',
  '**/tokenizer_config.json',
] as const;

/** The configuration files whose changes the language server is told of. */
export const CONFIG_FILE_PATTERNS = ['**/kvlint.toml', '**/pyproject.toml'] as const;

export const NOT_FOUND_MESSAGE =
  'kvlint not found: set kvlint.path or install kvlint (pip install kvlint-cache, or cargo install)';

/** Where the executable is, or why it could not be found. */
export type Resolution = { ok: true; path: string } | { ok: false; message: string };

/** The result of `kvlint render`: the prompt text of the turn, or an error message. */
export type RenderResult =
  | { ok: true; text: string; turn: number; format?: string; renderer?: string }
  | { ok: false; message: string };

const DEFAULT_PATHEXT = '.COM;.EXE;.BAT;.CMD';

/** The value of an environment variable; on Windows its name is matched without case (`Path`). */
function envValue(env: NodeJS.ProcessEnv, name: string, platform: NodeJS.Platform): string | undefined {
  if (platform !== 'win32') {
    return env[name];
  }
  const key = Object.keys(env).find((candidate) => candidate.toUpperCase() === name);
  return key === undefined ? undefined : env[key];
}

/** A regular file that may be run: on POSIX with an execute bit for this user. */
export function isExecutableFile(file: string, platform: NodeJS.Platform = process.platform): boolean {
  try {
    if (!fs.statSync(file).isFile()) {
      return false;
    }
    if (platform !== 'win32') {
      fs.accessSync(file, fs.constants.X_OK);
    }
    return true;
  } catch {
    return false;
  }
}

/** The names to try for `name` in one folder: on Windows with each PATHEXT extension. */
function candidates(name: string, env: NodeJS.ProcessEnv, platform: NodeJS.Platform): string[] {
  if (platform !== 'win32') {
    return [name];
  }
  const extensions = (envValue(env, 'PATHEXT', platform) || DEFAULT_PATHEXT)
    .split(';')
    .map((extension) => extension.trim())
    .filter((extension) => extension.length > 0);
  const names: string[] = [];
  const own = path.win32.extname(name).toLowerCase();
  if (own !== '' && extensions.some((extension) => extension.toLowerCase() === own)) {
    names.push(name);
  }
  for (const extension of extensions) {
    // Windows matches names without case; other file systems (and the tests) may not.
    for (const spelling of new Set([extension, extension.toLowerCase()])) {
      names.push(name + spelling);
    }
  }
  return names;
}

/**
 * The first executable called `name` in the folders of PATH (on Windows with the extensions of
 * PATHEXT), as the shell would find it; undefined when there is none.
 */
export function findOnPath(
  name: string,
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): string | undefined {
  const delimiter = platform === 'win32' ? ';' : ':';
  const folders = (envValue(env, 'PATH', platform) ?? '')
    .split(delimiter)
    .map((folder) => (platform === 'win32' ? folder.trim().replace(/^"(.*)"$/, '$1') : folder))
    // An empty or relative entry names a folder of the current one: never run a file of the
    // workspace by accident.
    .filter((folder) => folder.length > 0 && path.isAbsolute(folder));
  for (const folder of folders) {
    for (const candidate of candidates(name, env, platform)) {
      const file = path.join(folder, candidate);
      if (isExecutableFile(file, platform)) {
        return file;
      }
    }
  }
  return undefined;
}

/**
 * The kvlint executable: the `kvlint.path` setting when it is set (a bare name is looked up on
 * PATH, a relative path is taken from `baseDir`, `~/` is the home folder), else `kvlint` on PATH.
 */
export function resolveExecutable(
  setting: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
  baseDir?: string,
): Resolution {
  const configured = (setting ?? '').trim();
  if (configured === '') {
    const found = findOnPath('kvlint', env, platform);
    return found === undefined ? { ok: false, message: NOT_FOUND_MESSAGE } : { ok: true, path: found };
  }
  const hasSeparator = configured.includes('/') || (platform === 'win32' && configured.includes('\\'));
  if (!hasSeparator) {
    const found = findOnPath(configured, env, platform);
    return found === undefined
      ? { ok: false, message: `kvlint not found: kvlint.path is "${configured}", which is not on PATH` }
      : { ok: true, path: found };
  }
  let file = configured;
  if (/^~[/\\]/.test(file)) {
    file = path.join(os.homedir(), file.slice(2));
  }
  if (!path.isAbsolute(file)) {
    if (baseDir === undefined) {
      return {
        ok: false,
        message: `kvlint not found: kvlint.path "${configured}" is relative and no folder is open`,
      };
    }
    file = path.resolve(baseDir, file);
  }
  const found = [file, ...(path.extname(file) === '' ? candidates(file, env, platform) : [])].find((candidate) =>
    isExecutableFile(candidate, platform),
  );
  return found === undefined
    ? { ok: false, message: `kvlint not found: kvlint.path is "${configured}", which is not an executable file` }
    : { ok: true, path: found };
}

/** A line break as VS Code counts lines: CRLF, LF or a lone CR. */
const LINE_BREAK = /\r\n|\r|\n/;

/**
 * The turn under the cursor in a session file with one JSON request per line: the 0-based index
 * of the cursor's line among the non-blank lines. Undefined on a blank line or past the end.
 */
export function turnAtLine(text: string, line: number): number | undefined {
  const lines = text.split(LINE_BREAK);
  if (!Number.isInteger(line) || line < 0 || line >= lines.length) {
    return undefined;
  }
  const blank = (candidate: string): boolean => candidate.trim() === '';
  if (blank(lines[line])) {
    return undefined;
  }
  return lines.slice(0, line).filter((candidate) => !blank(candidate)).length;
}

/** The arguments of `kvlint render` for one turn of one session file, as JSON. */
export function renderArgs(file: string, turn: number): string[] {
  return ['render', file, '--turn', String(turn), '--format', 'json'];
}

/** The title of the document that shows a rendered turn. */
export function renderTitle(file: string, turn: number): string {
  return `${path.basename(file)} turn ${turn}.txt`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function errorText(error: unknown): string {
  if (isObject(error) && typeof error.message === 'string') {
    return error.message;
  }
  return typeof error === 'string' ? error : JSON.stringify(error);
}

/** The report `kvlint render` printed, or undefined when its output is not a JSON object. */
function decodeReport(stdout: string): Record<string, unknown> | undefined {
  try {
    const report: unknown = JSON.parse(stdout);
    return isObject(report) ? report : undefined;
  } catch {
    return undefined;
  }
}

/** The first session's first turn of a decoded report: its text, or the error reported. */
function reportedTurn(report: Record<string, unknown>): RenderResult {
  const errors = Array.isArray(report.errors) ? report.errors : [];
  if (errors.length > 0) {
    return { ok: false, message: errors.map(errorText).join('\n') };
  }
  const session: unknown = Array.isArray(report.sessions) ? report.sessions[0] : undefined;
  const turn: unknown = isObject(session) && Array.isArray(session.turns) ? session.turns[0] : undefined;
  if (!isObject(session) || !isObject(turn)) {
    return { ok: false, message: 'kvlint render reported no turn' };
  }
  const index = typeof turn.index === 'number' ? turn.index : 0;
  if (turn.error !== undefined && turn.error !== null) {
    return { ok: false, message: errorText(turn.error) };
  }
  if (typeof turn.text !== 'string') {
    return { ok: false, message: `kvlint render reported no text for turn ${index}` };
  }
  return {
    ok: true,
    text: turn.text,
    turn: index,
    format: typeof turn.format === 'string' ? turn.format : undefined,
    renderer: typeof session.renderer === 'string' ? session.renderer : undefined,
  };
}

/**
 * Reads the JSON report of `kvlint render --turn N --format json` (contract version 1:
 * `{version, sessions: [{path, renderer, turns: [{index, format, text?, token_ids?, error?}]}],
 * errors: [{path, message}]}`): the text of the first session's first turn, or the error.
 */
export function parseRenderReport(stdout: string): RenderResult {
  const report = decodeReport(stdout);
  if (report === undefined) {
    return { ok: false, message: 'kvlint render did not print a JSON report' };
  }
  return reportedTurn(report);
}

/** How `child_process.execFile` says a run failed (a spawn error or a non-zero exit). */
export interface ExecFailure {
  message: string;
  /** The exit code, or an error code such as `ENOENT` or `ERR_CHILD_PROCESS_STDIO_MAXBUFFER`. */
  code?: number | string | null;
  signal?: string | null;
}

/**
 * The outcome of one `kvlint render` run. A run that exits non-zero fails: with the error its
 * JSON report names when it printed one, else with what it wrote to stderr.
 */
export function renderOutcome(failure: ExecFailure | null, stdout: string, stderr: string): RenderResult {
  if (failure === null) {
    return parseRenderReport(stdout);
  }
  if (typeof failure.code === 'string') {
    return { ok: false, message: `kvlint render could not run: ${failure.message}` };
  }
  const report = decodeReport(stdout);
  const reported = report === undefined ? undefined : reportedTurn(report);
  if (reported !== undefined && !reported.ok) {
    return reported;
  }
  const written = stderr.trim();
  if (written !== '') {
    return { ok: false, message: written };
  }
  if (typeof failure.code === 'number') {
    return { ok: false, message: `kvlint render exited with code ${failure.code}` };
  }
  return { ok: false, message: `kvlint render was stopped${failure.signal ? ` by ${failure.signal}` : ''}` };
}

/** The largest output `kvlint render` may print for one turn (its text and token ids). */
const RENDER_MAX_BUFFER = 512 * 1024 * 1024;

/** Runs `kvlint render` (without a shell) in `cwd` and reads its report. */
export function runRender(executable: string, args: string[], cwd: string): Promise<RenderResult> {
  return new Promise((resolve) => {
    execFile(
      executable,
      args,
      { cwd, encoding: 'utf8', maxBuffer: RENDER_MAX_BUFFER, windowsHide: true },
      (error, stdout, stderr) => {
        const failure = error === null ? null : { message: error.message, code: error.code, signal: error.signal };
        resolve(renderOutcome(failure, stdout, stderr));
      },
    );
  });
}
