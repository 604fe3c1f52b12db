#!/usr/bin/env node
// A stand-in for the kvlint executable in the tests (run under Node, no VS Code):
//
// - `render FILE --turn N --format json` answers as kvlint render does, the text of the turn
//   being the arguments and folder it was run with; turn 9 is past the end of the session (a
//   JSON error, exit 2) and turn 7 fails with a message on stderr (exit 2);
// - `lsp` is a language server over stdio that answers `initialize` and `shutdown`, and appends
//   its arguments and each method it receives to the file named by FAKE_KVLINT_RECORD.
'use strict';
const fs = require('node:fs');

const args = process.argv.slice(2);
const record = process.env.FAKE_KVLINT_RECORD;

function remember(entry) {
  if (record) {
    fs.appendFileSync(record, `${JSON.stringify(entry)}\n`);
  }
}

function render() {
  const file = args[1];
  const turn = Number(args[3]);
  if (turn === 9) {
    const message = `${file} has no turn 9: its turns are 0 to 4`;
    console.log(JSON.stringify({ version: 1, sessions: [], errors: [{ path: file, message }] }));
    process.exit(2);
  }
  if (turn === 7) {
    process.stderr.write('error: the chat template could not be read\n');
    process.exit(2);
  }
  const text = JSON.stringify({ argv: args, cwd: process.cwd() });
  const turns = [{ index: turn, format: 'openai-chat', text, token_ids: [1, 2] }];
  console.log(JSON.stringify({ version: 1, sessions: [{ path: file, renderer: 'provider:o200k_base', turns }], errors: [] }));
}

function send(message) {
  const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', ...message }), 'utf8');
  process.stdout.write(`Content-Length: ${body.length}\r\n\r\n`);
  process.stdout.write(body);
}

function serve() {
  let buffer = Buffer.alloc(0);
  process.stdin.on('data', (chunk) => {
    buffer = Buffer.concat([buffer, chunk]);
    for (;;) {
      const end = buffer.indexOf('\r\n\r\n');
      if (end < 0) {
        return;
      }
      const length = Number(/Content-Length: (\d+)/i.exec(buffer.subarray(0, end).toString('ascii'))[1]);
      if (buffer.length < end + 4 + length) {
        return;
      }
      const message = JSON.parse(buffer.subarray(end + 4, end + 4 + length).toString('utf8'));
      buffer = buffer.subarray(end + 4 + length);
      remember({ method: message.method });
      if (message.method === 'initialize') {
        send({ id: message.id, result: { capabilities: { textDocumentSync: 1 } } });
      } else if (message.method === 'shutdown') {
        send({ id: message.id, result: null });
      } else if (message.method === 'exit') {
        process.exit(0);
      }
    }
  });
}

remember({ argv: args });
if (args[0] === 'render') {
  render();
} else if (args[0] === 'lsp') {
  serve();
} else {
  process.stderr.write(`error: unrecognized subcommand '${args[0]}'\n`);
  process.exit(2);
}
