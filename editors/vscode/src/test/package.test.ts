// The manifest (package.json) against the code: every command the code uses is contributed and
// every contributed command is registered, every `kvlint.*` name in the code is a contributed
// command or setting, and the activation events cover the files the language server checks.

import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { COMMANDS, DOCUMENT_PATTERNS } from '../kvlint';

// Compiled to out/test/: the extension's folder is two levels up.
const root = path.resolve(__dirname, '..', '..');

interface Manifest {
  main: string;
  engines: { vscode: string };
  activationEvents: string[];
  devDependencies: Record<string, string>;
  contributes: {
    commands: { command: string; title: string; category?: string }[];
    configuration: { properties: Record<string, { type: string; default?: unknown; enum?: string[] }> };
  };
}

const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as Manifest;
const contributedCommands = new Set(manifest.contributes.commands.map((entry) => entry.command));
const settings = new Set(Object.keys(manifest.contributes.configuration.properties));

/** The extension's sources (not its tests), as text. */
function sources(): Map<string, string> {
  const folder = path.join(root, 'src');
  const files = new Map<string, string>();
  for (const name of fs.readdirSync(folder)) {
    if (name.endsWith('.ts')) {
      files.set(name, fs.readFileSync(path.join(folder, name), 'utf8'));
    }
  }
  return files;
}

/** A command argument in the code: `COMMANDS.name` or a string literal, as the command id. */
function commandId(argument: string): string {
  const trimmed = argument.trim();
  const constant = /^COMMANDS\.(\w+)$/.exec(trimmed);
  if (constant !== null) {
    const id = (COMMANDS as Record<string, string>)[constant[1]];
    assert.ok(id !== undefined, `COMMANDS has no ${constant[1]}`);
    return id;
  }
  const literal = /^(['"`])([^'"`]+)\1$/.exec(trimmed);
  assert.ok(literal !== null, `the command ${trimmed} is neither COMMANDS.name nor a string literal`);
  return literal[2];
}

/** The first argument of each call of `callee(` in the text. */
function firstArguments(text: string, callee: string): string[] {
  const pattern = new RegExp(`${callee.replace(/\./g, '\\.')}\\(\\s*([^,)]+)`, 'g');
  return [...text.matchAll(pattern)].map((match) => match[1]);
}

describe('package.json', () => {
  it('contributes exactly the commands in COMMANDS, titled under the kvlint category', () => {
    assert.deepEqual([...contributedCommands].sort(), Object.values(COMMANDS).sort());
    for (const entry of manifest.contributes.commands) {
      assert.equal(entry.category, 'kvlint', entry.command);
      assert.ok(entry.title.length > 0, entry.command);
    }
    assert.equal(COMMANDS.restart, 'kvlint.restart');
    assert.equal(COMMANDS.renderTurn, 'kvlint.renderTurn');
  });

  it('contributes every command the code registers or runs, and the code registers every one', () => {
    const registered = new Set<string>();
    const used: string[] = [];
    for (const text of sources().values()) {
      for (const argument of firstArguments(text, 'registerCommand')) {
        registered.add(commandId(argument));
      }
      for (const argument of firstArguments(text, 'executeCommand')) {
        used.push(commandId(argument));
      }
      for (const match of text.matchAll(/\.command\s*=\s*([^;]+);/g)) {
        used.push(commandId(match[1]));
      }
    }
    assert.deepEqual([...registered].sort(), [...contributedCommands].sort());
    assert.ok(used.includes(COMMANDS.showOutput), 'the status bar item shows the output');
    for (const id of used.filter((command) => command.startsWith('kvlint.'))) {
      assert.ok(contributedCommands.has(id), `${id} is used in the code but not contributed`);
    }
  });

  it('contributes every kvlint.* name the code spells out, as a command or a setting', () => {
    const names = new Set<string>();
    for (const text of sources().values()) {
      for (const match of text.matchAll(/['"`](kvlint\.[\w.]+)['"`]/g)) {
        names.add(match[1]);
      }
    }
    assert.ok(names.has('kvlint.path'), 'the code reads kvlint.path');
    for (const name of names) {
      assert.ok(
        contributedCommands.has(name) || settings.has(name),
        `${name} is in the code but is no contributed command or setting`,
      );
    }
  });

  it('contributes the settings kvlint.path and kvlint.trace.server', () => {
    const properties = manifest.contributes.configuration.properties;
    assert.equal(properties['kvlint.path'].type, 'string');
    assert.equal(properties['kvlint.path'].default, '');
    assert.deepEqual(properties['kvlint.trace.server'].enum, ['off', 'messages', 'verbose']);
    assert.equal(properties['kvlint.trace.server'].default, 'off');
  });

  it('activates on every file pattern of the document selector', () => {
    for (const pattern of DOCUMENT_PATTERNS) {
      assert.ok(
        manifest.activationEvents.includes(`workspaceContains:${pattern}`),
        `no activation event workspaceContains:${pattern}`,
      );
    }
    const extensions = /^\*\*\/\*\.\{([^}]+)\}$/.exec(DOCUMENT_PATTERNS[0]);
    assert.ok(extensions !== null);
    assert.deepEqual(extensions[1].split(',').sort(), [
      'hbs',
      'j2',
      'jinja',
      'jinja2',
      'jsonl',
      'mustache',
      'prompt',
      'prompty',
    ]);
    assert.ok(DOCUMENT_PATTERNS.includes('**/tokenizer_config.json'));
  });

  it('targets VS Code 1.85 with matching types, and its main is the compiled extension', () => {
    assert.equal(manifest.engines.vscode, '^1.85.0');
    assert.match(manifest.devDependencies['@types/vscode'], /^~?1\.85\.\d+$/);
    assert.equal(manifest.main, './out/extension.js');
    assert.ok(fs.existsSync(path.join(root, manifest.main)), `${manifest.main} is not built`);
  });
});
