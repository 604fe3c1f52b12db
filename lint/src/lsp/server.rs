//! The server's loop: requests answered, notifications applied, configuration files
//! watched and read again, and each open document analysed when its text changed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lsp_server::{ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::notification::{
    DidChangeConfiguration, DidChangeTextDocument, DidChangeWatchedFiles, DidCloseTextDocument,
    DidOpenTextDocument, DidSaveTextDocument, Notification as _,
};
use lsp_types::request::{
    CodeActionRequest, DocumentDiagnosticRequest, HoverRequest, RegisterCapability, Request as _,
    WorkspaceDiagnosticRefresh,
};
use lsp_types::{
    DidChangeTextDocumentParams, DidChangeWatchedFilesParams,
    DidChangeWatchedFilesRegistrationOptions, DidCloseTextDocumentParams,
    DidOpenTextDocumentParams, DidSaveTextDocumentParams, DocumentDiagnosticParams,
    FileSystemWatcher, GlobPattern, HoverParams, Registration, RegistrationParams, Uri,
};
use miette::IntoDiagnostic;

use super::document::{Analysis, Document, Kind, Problem};
use super::quick_fix::ActionsAsked;
use super::{Args, Server};
use crate::workspace::check::Setup;
use crate::workspace::config::{Config, Discovery};

/// The configuration files whose changes make every open document be analysed again.
const CONFIGURATION_FILES: [&str; 2] = ["kvlint.toml", "pyproject.toml"];

enum Flow {
    Continue,
    /// `exit` arrived: the process's exit code, 1 when no `shutdown` came before it.
    Exit(u8),
}

impl Server {
    /// Handles messages until `exit` (or the end of the stream) and returns the exit code the
    /// protocol asks for: 0 when `shutdown` came first, 1 for an `exit` without it.
    pub(super) fn serve(&mut self) -> miette::Result<u8> {
        while let Ok(message) = self.connection.receiver.recv() {
            if let Flow::Exit(code) = self.handle(message)? {
                return Ok(code);
            }
            // Everything already waiting first (a burst of edits), then one analysis each.
            while let Ok(message) = self.connection.receiver.try_recv() {
                if let Flow::Exit(code) = self.handle(message)? {
                    return Ok(code);
                }
            }
            if !self.client.pulls {
                self.publish_changed();
            }
        }
        // The client closed the stream: it is gone, whatever it sent before.
        Ok(0)
    }

    fn handle(&mut self, message: Message) -> miette::Result<Flow> {
        match message {
            Message::Request(request) => {
                if self
                    .connection
                    .handle_shutdown(&request)
                    .into_diagnostic()?
                {
                    // lsp-server answered `shutdown` and read the `exit` that follows.
                    return Ok(Flow::Exit(0));
                }
                let response = self.answer(request);
                self.send(response.into());
            }
            Message::Notification(notification) => {
                if notification.method == "exit" {
                    return Ok(Flow::Exit(1));
                }
                self.notified(notification);
            }
            // Answers to the server's own requests (registration, refresh): nothing to do.
            Message::Response(_) => {}
        }
        Ok(Flow::Continue)
    }

    pub(super) fn send(&self, message: Message) {
        // A closed channel means the client is gone; the loop ends on the next receive.
        let _ = self.connection.sender.send(message);
    }

    fn answer(&mut self, request: Request) -> Response {
        let id = request.id.clone();
        let answered = match request.method.as_str() {
            HoverRequest::METHOD => params::<HoverParams>(request)
                .map(|params| serde_json::to_value(self.hover(&params))),
            CodeActionRequest::METHOD => params::<ActionsAsked>(request)
                .map(|params| serde_json::to_value(self.code_actions(&params))),
            DocumentDiagnosticRequest::METHOD => params::<DocumentDiagnosticParams>(request)
                .map(|params| serde_json::to_value(self.pulled(&params))),
            method => {
                return Response::new_err(
                    id,
                    ErrorCode::MethodNotFound as i32,
                    format!("kvlint lsp does not handle {method}"),
                );
            }
        };
        match answered {
            Ok(Ok(value)) => Response {
                id,
                result: Some(value),
                error: None,
            },
            Ok(Err(error)) => {
                Response::new_err(id, ErrorCode::InternalError as i32, error.to_string())
            }
            Err(error) => Response::new_err(id, ErrorCode::InvalidParams as i32, error.to_string()),
        }
    }

    fn notified(&mut self, notification: Notification) {
        match notification.method.as_str() {
            DidOpenTextDocument::METHOD => {
                if let Ok(params) = params::<DidOpenTextDocumentParams>(notification) {
                    let document = params.text_document;
                    self.documents.insert(
                        document.uri.as_str().to_owned(),
                        Document::new(
                            file_path(&document.uri),
                            document.text,
                            document.version,
                            self.client.encoding,
                        ),
                    );
                }
            }
            DidChangeTextDocument::METHOD => {
                if let Ok(params) = params::<DidChangeTextDocumentParams>(notification)
                    && let Some(document) =
                        self.documents.get_mut(params.text_document.uri.as_str())
                {
                    for change in params.content_changes {
                        document.change(change.range, change.text, self.client.encoding);
                    }
                    document.version = params.text_document.version;
                }
            }
            // Configurations are read from disk: opening or editing one changes nothing
            // until it is saved.
            DidSaveTextDocument::METHOD => {
                if let Ok(params) = params::<DidSaveTextDocumentParams>(notification)
                    && is_configuration(&file_path(&params.text_document.uri))
                {
                    self.reload_configuration();
                }
            }
            DidCloseTextDocument::METHOD => {
                if let Ok(params) = params::<DidCloseTextDocumentParams>(notification) {
                    let uri = params.text_document.uri;
                    self.documents.remove(uri.as_str());
                    if !self.client.pulls {
                        self.publish(uri, Vec::new(), None);
                    }
                }
            }
            DidChangeWatchedFiles::METHOD => {
                if let Ok(params) = params::<DidChangeWatchedFilesParams>(notification)
                    && params
                        .changes
                        .iter()
                        .any(|change| is_configuration(&file_path(&change.uri)))
                {
                    self.reload_configuration();
                }
            }
            DidChangeConfiguration::METHOD => self.reload_configuration(),
            _ => {}
        }
    }

    /// Asks the client to tell of changes to configuration files, where it can be asked.
    pub(super) fn watch_configuration(&self) {
        if !self.client.watches {
            return;
        }
        let watchers = CONFIGURATION_FILES
            .iter()
            .map(|name| FileSystemWatcher {
                glob_pattern: GlobPattern::String(format!("**/{name}")),
                kind: None,
            })
            .collect();
        let registration = Registration {
            id: "kvlint-configuration".to_owned(),
            method: DidChangeWatchedFiles::METHOD.to_owned(),
            register_options: serde_json::to_value(DidChangeWatchedFilesRegistrationOptions {
                watchers,
            })
            .ok(),
        };
        self.send(
            Request::new(
                RequestId::from("kvlint/watch-configuration".to_owned()),
                RegisterCapability::METHOD.to_owned(),
                RegistrationParams {
                    registrations: vec![registration],
                },
            )
            .into(),
        );
    }

    /// Forgets every configuration read and every analysis made: the next ones read the
    /// files again.
    fn reload_configuration(&mut self) {
        self.configs = Discovery::default();
        self.setups.clear();
        for document in self.documents.values_mut() {
            document.invalidate();
        }
        if self.client.pulls && self.client.refresh {
            self.generation += 1;
            self.send(
                Request::new(
                    RequestId::from(format!("kvlint/refresh-{}", self.generation)),
                    WorkspaceDiagnosticRefresh::METHOD.to_owned(),
                    (),
                )
                .into(),
            );
        }
    }

    /// The analysis of an open document, made now if its text changed since the last one.
    pub(super) fn analysis(&mut self, uri: &str) -> Option<(u64, Arc<Analysis>)> {
        let Self {
            documents,
            configs,
            setups,
            args,
            generation,
            ..
        } = self;
        let document = documents.get_mut(uri)?;
        if let Some(analysis) = &document.analysis {
            return Some(analysis.clone());
        }
        let analysis = Arc::new(analyse(document, configs, setups, args));
        *generation += 1;
        document.analysis = Some((*generation, Arc::clone(&analysis)));
        document.edited = None;
        Some((*generation, analysis))
    }
}

/// Analyses a document with the configuration that applies to its file.
fn analyse(
    document: &Document,
    configs: &mut Discovery,
    setups: &mut HashMap<Option<PathBuf>, Result<Arc<Setup>, String>>,
    args: &Args,
) -> Analysis {
    let path = &document.path;
    let text = &document.text;
    let config = match configs.for_file(path) {
        Ok(config) => config,
        Err(error) => return Analysis::failed(Problem::of(&error.into(), path, text)),
    };
    match Kind::of(path) {
        Kind::Template => Analysis::of_template(path, text, config.as_ref()),
        Kind::Session => {
            let setup = setups
                .entry(config.as_ref().map(|config| config.path.clone()))
                .or_insert_with(|| setup(args, config.as_ref()));
            match setup {
                Ok(setup) => document
                    .edited
                    .as_ref()
                    .and_then(|(before, first_changed)| {
                        Analysis::of_session_edit(
                            path,
                            text,
                            &document.lines,
                            config.as_ref(),
                            setup,
                            (before, *first_changed),
                        )
                    })
                    .unwrap_or_else(|| {
                        Analysis::of_sessions(path, text, &document.lines, config.as_ref(), setup)
                    }),
                Err(message) => Analysis::failed(Problem {
                    message: message.clone(),
                    range: 0..0,
                }),
            }
        }
    }
}

/// The setup sessions under `config` are checked with, or why there is none.
fn setup(args: &Args, config: Option<&Config>) -> Result<Arc<Setup>, String> {
    Setup::of(&args.render, args.engine.as_ref(), None, config)
        .map(Arc::new)
        .map_err(|error| {
            let under = config.map_or_else(
                || "the flags of kvlint lsp".to_owned(),
                |config| config.path.display().to_string(),
            );
            format!("sessions cannot be checked under {under}: {error}")
        })
}

fn params<P: serde::de::DeserializeOwned>(
    message: impl Into<Message>,
) -> Result<P, serde_json::Error> {
    let params = match message.into() {
        Message::Request(request) => request.params,
        Message::Notification(notification) => notification.params,
        Message::Response(_) => serde_json::Value::Null,
    };
    serde_json::from_value(params)
}

/// The file a URI names; for a URI that names none (an unsaved buffer), its last segment,
/// which still tells the kind of document.
fn file_path(uri: &Uri) -> PathBuf {
    url::Url::parse(uri.as_str())
        .ok()
        .and_then(|url| url.to_file_path().ok())
        .unwrap_or_else(|| {
            PathBuf::from(uri.as_str().rsplit(['/', ':']).next().unwrap_or_default())
        })
}

fn is_configuration(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| CONFIGURATION_FILES.contains(&name))
}
