// Unit tests of the editor-free logic, under plain Node (no VS Code).

import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  NOT_FOUND_MESSAGE,
  findOnPath,
  parseRenderReport,
  renderArgs,
  renderOutcome,
  renderTitle,
  resolveExecutable,
  runRender,
  turnAtLine,
} from '../kvlint';

describe('finding kvlint on PATH', () => {
  let root: string;
  let bin: string;
  let empty: string;

  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'kvlint-vscode-'));
    bin = path.join(root, 'bin');
    empty = path.join(root, 'empty');
    fs.mkdirSync(bin);
    fs.mkdirSync(empty);
  });

  afterEach(() => {
    fs.rmSync(root, { recursive: true, force: true });
  });

  function fakeExecutable(folder: string, name: string, mode = 0o755): string {
    const file = path.join(folder, name);
    fs.writeFileSync(file, '#!/bin/sh\nexit 0\n');
    fs.chmodSync(file, mode);
    return file;
  }

  it('finds the executable in a PATH folder, the first folder first', () => {
    const second = path.join(root, 'second');
    fs.mkdirSync(second);
    fakeExecutable(second, 'kvlint');
    const first = fakeExecutable(bin, 'kvlint');
    const env = { PATH: [empty, bin, second].join(':') };
    assert.equal(findOnPath('kvlint', env, 'linux'), first);
    assert.deepEqual(resolveExecutable('', env, 'linux'), { ok: true, path: first });
  });

  it('says how to install kvlint when no PATH folder has it', () => {
    const env = { PATH: empty };
    assert.equal(findOnPath('kvlint', env, 'linux'), undefined);
    assert.deepEqual(resolveExecutable('', env, 'linux'), { ok: false, message: NOT_FOUND_MESSAGE });
    assert.deepEqual(resolveExecutable(undefined, {}, 'linux'), { ok: false, message: NOT_FOUND_MESSAGE });
    assert.match(NOT_FOUND_MESSAGE, /set kvlint\.path or install kvlint \(pip install kvlint-cache, or cargo install\)/);
  });

  it('passes over a file without an execute bit, a folder of that name and relative PATH entries', function () {
    if (process.platform === 'win32') {
      this.skip();
    }
    fakeExecutable(bin, 'kvlint', 0o644);
    assert.equal(findOnPath('kvlint', { PATH: bin }, 'linux'), undefined);
    fs.mkdirSync(path.join(empty, 'kvlint'));
    assert.equal(findOnPath('kvlint', { PATH: empty }, 'linux'), undefined);
    fakeExecutable(root, 'kvlint');
    assert.equal(findOnPath('kvlint', { PATH: path.relative(process.cwd(), root) }, 'linux'), undefined);
    assert.equal(findOnPath('kvlint', { PATH: root }, 'linux'), path.join(root, 'kvlint'));
  });

  it('never takes an empty PATH entry for the current folder', () => {
    const cwd = process.cwd();
    fakeExecutable(bin, 'kvlint');
    try {
      process.chdir(bin);
      assert.equal(findOnPath('kvlint', { PATH: `:${empty}:` }, 'linux'), undefined);
    } finally {
      process.chdir(cwd);
    }
  });

  it('on Windows tries the PATHEXT extensions, with PATH spelt Path and quoted folders', () => {
    const file = fakeExecutable(bin, 'kvlint.exe');
    const env = { Path: `${empty};"${bin}"`, PATHEXT: '.COM;.EXE;.BAT' };
    assert.equal(findOnPath('kvlint', env, 'win32'), file);
    // A name that already carries one of the extensions is taken as it is.
    assert.equal(findOnPath('kvlint.exe', env, 'win32'), file);
    // Without that extension in PATHEXT, the file is not a command.
    assert.equal(findOnPath('kvlint', { Path: bin, PATHEXT: '.COM;.BAT' }, 'win32'), undefined);
  });

  it('takes kvlint.path when it is set: a path, a relative path or a name on PATH', () => {
    const file = fakeExecutable(bin, 'kvlint-dev');
    assert.deepEqual(resolveExecutable(` ${file} `, { PATH: empty }, 'linux'), { ok: true, path: file });
    assert.deepEqual(resolveExecutable('./bin/kvlint-dev', { PATH: empty }, 'linux', root), { ok: true, path: file });
    assert.deepEqual(resolveExecutable('kvlint-dev', { PATH: bin }, 'linux'), { ok: true, path: file });

    const missing = resolveExecutable(path.join(empty, 'kvlint'), { PATH: bin }, 'linux');
    assert.equal(missing.ok, false);
    assert.match(!missing.ok ? missing.message : '', /^kvlint not found: kvlint\.path is ".*empty\/kvlint", which is not an executable file$/);
    const notOnPath = resolveExecutable('kvlint-dev', { PATH: empty }, 'linux');
    assert.match(!notOnPath.ok ? notOnPath.message : '', /which is not on PATH/);
    const noFolder = resolveExecutable('./bin/kvlint-dev', { PATH: bin }, 'linux');
    assert.match(!noFolder.ok ? noFolder.message : '', /is relative and no folder is open/);
  });
});

describe('the turn under the cursor', () => {
  const session = [
    '{"messages": [{"role": "user", "content": "a"}]}',
    '',
    '{"messages": [{"role": "user", "content": "b"}]}',
    '   ',
    '\t',
    '{"messages": [{"role": "user", "content": "c"}]}',
    '',
  ].join('\n');

  it('counts the non-blank lines before the cursor line', () => {
    assert.equal(turnAtLine(session, 0), 0);
    assert.equal(turnAtLine(session, 2), 1);
    assert.equal(turnAtLine(session, 5), 2);
  });

  it('has no turn on a blank or whitespace-only line', () => {
    assert.equal(turnAtLine(session, 1), undefined);
    assert.equal(turnAtLine(session, 3), undefined);
    assert.equal(turnAtLine(session, 4), undefined);
    assert.equal(turnAtLine(session, 6), undefined);
  });

  it('has no turn past the end or before the start', () => {
    assert.equal(turnAtLine(session, 7), undefined);
    assert.equal(turnAtLine(session, 100), undefined);
    assert.equal(turnAtLine(session, -1), undefined);
    assert.equal(turnAtLine('', 0), undefined);
  });

  it('counts lines as VS Code does, with CRLF and a leading blank line', () => {
    const crlf = '\r\n{"a": 1}\r\n\r\n{"a": 2}\r\n{"a": 3}';
    assert.equal(turnAtLine(crlf, 1), 0);
    assert.equal(turnAtLine(crlf, 3), 1);
    assert.equal(turnAtLine(crlf, 4), 2);
    assert.equal(turnAtLine(crlf, 0), undefined);
  });
});

describe('the kvlint render command line', () => {
  it('renders one turn of one file as JSON', () => {
    assert.deepEqual(renderArgs('/work/s p/agent.jsonl', 3), [
      'render',
      '/work/s p/agent.jsonl',
      '--turn',
      '3',
      '--format',
      'json',
    ]);
    assert.deepEqual(renderArgs('s.jsonl', 0).slice(2, 4), ['--turn', '0']);
  });

  it('names the rendered document after the file and the turn', () => {
    assert.equal(renderTitle('/work/sessions/agent.jsonl', 2), 'agent.jsonl turn 2.txt');
  });
});

describe('reading the render report', () => {
  const success = JSON.stringify({
    version: 1,
    sessions: [
      {
        path: 'fixtures/examples/coding-agent.jsonl',
        renderer: 'provider:o200k_base',
        turns: [{ index: 2, format: 'openai-chat', text: '<|im_start|>system\nYou are', token_ids: [1, 2, 3] }],
      },
    ],
    errors: [],
  });
  const noSuchTurn = JSON.stringify({
    version: 1,
    sessions: [],
    errors: [
      {
        path: 'fixtures/examples/coding-agent.jsonl',
        message: 'fixtures/examples/coding-agent.jsonl has no turn 9: its turns are 0 to 4',
      },
    ],
  });
  const refused = JSON.stringify({
    version: 1,
    sessions: [
      {
        path: 's.jsonl',
        renderer: 'engine:vllm:stable.jinja+o200k_base',
        turns: [{ index: 1, format: 'openai-chat', error: 'turn 1 cannot be rendered: vLLM refuses the request' }],
      },
    ],
    errors: [],
  });

  it('gives the text of the first turn of a success', () => {
    assert.deepEqual(parseRenderReport(success), {
      ok: true,
      text: '<|im_start|>system\nYou are',
      turn: 2,
      format: 'openai-chat',
      renderer: 'provider:o200k_base',
    });
    assert.deepEqual(renderOutcome(null, success, ''), parseRenderReport(success));
  });

  it('gives the message of an error document', () => {
    assert.deepEqual(parseRenderReport(noSuchTurn), {
      ok: false,
      message: 'fixtures/examples/coding-agent.jsonl has no turn 9: its turns are 0 to 4',
    });
    assert.deepEqual(parseRenderReport(refused), {
      ok: false,
      message: 'turn 1 cannot be rendered: vLLM refuses the request',
    });
  });

  it('says so when the output is no report or has no turn', () => {
    assert.deepEqual(parseRenderReport('error: unexpected argument'), {
      ok: false,
      message: 'kvlint render did not print a JSON report',
    });
    assert.deepEqual(parseRenderReport('[1]'), { ok: false, message: 'kvlint render did not print a JSON report' });
    assert.deepEqual(parseRenderReport('{"version": 1, "sessions": [], "errors": []}'), {
      ok: false,
      message: 'kvlint render reported no turn',
    });
    assert.deepEqual(parseRenderReport('{"sessions": [{"turns": [{"index": 4}]}]}'), {
      ok: false,
      message: 'kvlint render reported no text for turn 4',
    });
  });

  it('fails a non-zero exit with the report error, else with stderr', () => {
    assert.deepEqual(renderOutcome({ message: 'Command failed', code: 2 }, noSuchTurn, 'ignored\n'), {
      ok: false,
      message: 'fixtures/examples/coding-agent.jsonl has no turn 9: its turns are 0 to 4',
    });
    assert.deepEqual(renderOutcome({ message: 'Command failed', code: 1 }, refused, ''), {
      ok: false,
      message: 'turn 1 cannot be rendered: vLLM refuses the request',
    });
    assert.deepEqual(renderOutcome({ message: 'Command failed', code: 2 }, '', "error: unrecognized subcommand 'render'\n"), {
      ok: false,
      message: "error: unrecognized subcommand 'render'",
    });
    // A non-zero exit is a failure even when the report has a text.
    assert.deepEqual(renderOutcome({ message: 'Command failed', code: 1 }, success, 'it broke'), {
      ok: false,
      message: 'it broke',
    });
    assert.deepEqual(renderOutcome({ message: 'Command failed', code: 3 }, '', ''), {
      ok: false,
      message: 'kvlint render exited with code 3',
    });
    assert.deepEqual(renderOutcome({ message: 'Command failed', code: null, signal: 'SIGKILL' }, '', ''), {
      ok: false,
      message: 'kvlint render was stopped by SIGKILL',
    });
  });

  it('says when kvlint could not be run at all', () => {
    assert.deepEqual(renderOutcome({ message: 'spawn /nope/kvlint ENOENT', code: 'ENOENT' }, '', ''), {
      ok: false,
      message: 'kvlint render could not run: spawn /nope/kvlint ENOENT',
    });
  });
});

/** A stand-in for kvlint (see the file): compiled to out/test/, the fixtures are two levels up. */
const FAKE_KVLINT = path.resolve(__dirname, '..', '..', 'test-fixtures', 'fake-kvlint.js');

describe('running kvlint render', () => {
  let root: string;
  let kvlint: string;

  before(function () {
    if (process.platform === 'win32') {
      this.skip();
    }
    root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'kvlint-render-')));
    kvlint = path.join(root, 'kvlint');
    fs.copyFileSync(FAKE_KVLINT, kvlint);
    fs.chmodSync(kvlint, 0o755);
  });

  after(() => {
    if (root !== undefined) {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('runs kvlint with the arguments as they are, in the given folder, and gives the text', async () => {
    // A space, a quote and a `$` in the name would change the command under a shell.
    const file = path.join(root, "my 'agent' $HOME.jsonl");
    const result = await runRender(kvlint, renderArgs(file, 3), root);
    assert.ok(result.ok, JSON.stringify(result));
    assert.equal(result.turn, 3);
    assert.equal(result.renderer, 'provider:o200k_base');
    assert.deepEqual(JSON.parse(result.text), {
      argv: ['render', file, '--turn', '3', '--format', 'json'],
      cwd: root,
    });
  });

  it('fails with the error of the report, or with stderr', async () => {
    const file = path.join(root, 's.jsonl');
    assert.deepEqual(await runRender(kvlint, renderArgs(file, 9), root), {
      ok: false,
      message: `${file} has no turn 9: its turns are 0 to 4`,
    });
    assert.deepEqual(await runRender(kvlint, renderArgs(file, 7), root), {
      ok: false,
      message: 'error: the chat template could not be read',
    });
  });

  it('fails when the executable is missing', async () => {
    const result = await runRender(path.join(root, 'missing', 'kvlint'), renderArgs('s.jsonl', 0), root);
    assert.equal(result.ok, false);
    assert.match(!result.ok ? result.message : '', /^kvlint render could not run: .*ENOENT/);
  });
});
