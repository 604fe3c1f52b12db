//! A client of `kvlint lsp` over its pipes, for the tests and the benchmark: initialize, send,
//! read the diagnostics published for a version, shut down.
#![allow(dead_code)]

use std::io::{BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use lsp_server::{Message, Notification, Request, RequestId};
use serde_json::{Value, json};

pub struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Server {
    /// `kvlint lsp`, initialized as a client with no optional capabilities.
    pub fn start() -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kvlint"))
            .arg("lsp")
            .current_dir(std::env::temp_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut server = Self {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
        };
        server.send(
            Request::new(
                RequestId::from(1),
                "initialize".to_owned(),
                json!({"capabilities": {}, "processId": null, "rootUri": null}),
            )
            .into(),
        );
        let Message::Response(response) = server.receive() else {
            panic!("no answer to initialize");
        };
        assert_eq!(
            response.result.unwrap()["capabilities"]["textDocumentSync"]["change"],
            2,
            "edits are taken incrementally"
        );
        server.notify("initialized", json!({}));
        server
    }

    pub fn send(&mut self, message: Message) {
        message.write(&mut self.stdin).unwrap();
        self.stdin.flush().unwrap();
    }

    pub fn receive(&mut self) -> Message {
        Message::read(&mut self.stdout).unwrap().unwrap()
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(Notification::new(method.to_owned(), params).into());
    }

    /// The diagnostics published for `uri` at `version`.
    pub fn diagnostics(&mut self, uri: &str, version: i32) -> Vec<Value> {
        loop {
            if let Message::Notification(notification) = self.receive()
                && notification.method == "textDocument/publishDiagnostics"
                && notification.params["uri"] == uri
                && notification.params["version"] == version
            {
                return notification.params["diagnostics"]
                    .as_array()
                    .unwrap()
                    .clone();
            }
        }
    }

    pub fn open(&mut self, uri: &str, text: &str) -> Vec<Value> {
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "jsonl", "version": 0, "text": text}}),
        );
        self.diagnostics(uri, 0)
    }

    /// Sends `exit` with no `shutdown` before it; the server's exit status.
    pub fn exit_without_shutdown(mut self) -> std::process::ExitStatus {
        self.notify("exit", Value::Null);
        self.child.wait().unwrap()
    }

    pub fn stop(mut self) {
        self.send(Request::new(RequestId::from(2), "shutdown".to_owned(), ()).into());
        self.notify("exit", Value::Null);
        assert!(self.child.wait().unwrap().success());
    }
}
