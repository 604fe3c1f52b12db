//! `kvlint lsp`: the language server, over stdio.
//!
//! It checks the documents an editor has open on the same functions as `kvlint check`
//! (session files and recordings) and `kvlint template` (chat templates and application
//! prompt templates), with the `kvlint.toml` or `[tool.kvlint]` that applies to each file,
//! read from disk and read again when one is saved or changes on disk. It offers:
//!
//! - diagnostics, pushed (`textDocument/publishDiagnostics`) to clients that do not pull, and
//!   pulled (`textDocument/diagnostic`) by clients that do: the exact range, the severity,
//!   the rule's code with a link to its documentation, and for a break between two turns the
//!   same part of the turn before as related information;
//! - hover over a finding: the diverging token windows of both turns and the tokens lost;
//! - code actions where the fix is mechanical (see [`actions`]).
//!
//! Changes arrive as edits (incremental document sync). Messages already waiting are handled
//! before a changed document is analysed again, so a burst of edits costs one analysis; an
//! edit to a session file is analysed from the turn before the first one it touches (see
//! [`Analysis::of_session_edit`]).

mod actions;
mod document;
mod position;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kvlint_core::cache::Engine;
use kvlint_core::diagnostic::Severity;
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::notification::{
    DidChangeConfiguration, DidChangeTextDocument, DidChangeWatchedFiles, DidCloseTextDocument,
    DidOpenTextDocument, DidSaveTextDocument, Notification as _, PublishDiagnostics,
};
use lsp_types::request::{
    CodeActionRequest, DocumentDiagnosticRequest, HoverRequest, RegisterCapability, Request as _,
    WorkspaceDiagnosticRefresh,
};
use lsp_types::{
    CodeAction, CodeActionKind, CodeActionOptions, CodeActionOrCommand,
    CodeActionProviderCapability, CodeDescription, Diagnostic, DiagnosticOptions,
    DiagnosticRelatedInformation, DiagnosticServerCapabilities, DiagnosticSeverity,
    DidChangeTextDocumentParams, DidChangeWatchedFilesParams,
    DidChangeWatchedFilesRegistrationOptions, DidCloseTextDocumentParams,
    DidOpenTextDocumentParams, DidSaveTextDocumentParams, DocumentDiagnosticParams,
    DocumentDiagnosticReport, DocumentDiagnosticReportResult, FileSystemWatcher,
    FullDocumentDiagnosticReport, GlobPattern, Hover, HoverContents, HoverParams,
    HoverProviderCapability, InitializeParams, InitializeResult, Location, MarkupContent,
    MarkupKind, NumberOrString, PublishDiagnosticsParams, Registration, RegistrationParams,
    RelatedFullDocumentDiagnosticReport, RelatedUnchangedDocumentDiagnosticReport,
    ServerCapabilities, ServerInfo, TextDocumentIdentifier, TextDocumentSyncCapability,
    TextDocumentSyncKind, TextDocumentSyncOptions, TextDocumentSyncSaveOptions, TextEdit,
    UnchangedDocumentDiagnosticReport, Uri, WorkspaceEdit,
};
use miette::IntoDiagnostic;

use self::document::{Analysis, Document, Kind, Placed, Problem};
use self::position::Encoding;
use crate::commands::RenderArgs;
use crate::commands::check::Setup;
use crate::config::{Config, Discovery};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub render: RenderArgs,
    /// Predict what this engine serves from cache, as `kvlint check --engine` (the
    /// configuration's `engine` otherwise).
    #[arg(long, value_name = "NAME[:OPTIONS]")]
    pub engine: Option<Engine>,
    /// Talk over stdin and stdout (the only transport; accepted for clients that say so).
    #[arg(long, hide = true)]
    pub stdio: bool,
}

/// Serves one client over stdin and stdout until it sends `exit` or closes the stream.
pub fn serve(args: Args) -> miette::Result<()> {
    let (connection, io_threads) = Connection::stdio();
    let (id, params) = connection.initialize_start().into_diagnostic()?;
    let client = ClientSupport::of(&params);
    let result = InitializeResult {
        capabilities: capabilities(client.encoding),
        server_info: Some(ServerInfo {
            name: "kvlint".to_owned(),
            version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        }),
    };
    connection
        .initialize_finish(id, serde_json::to_value(result).into_diagnostic()?)
        .into_diagnostic()?;
    let mut server = Server {
        connection,
        args,
        client,
        documents: HashMap::new(),
        configs: Discovery::default(),
        setups: HashMap::new(),
        generation: 0,
    };
    server.watch_configuration();
    let served = server.serve();
    // The writer thread ends when the last sender is dropped.
    drop(server);
    io_threads.join().into_diagnostic()?;
    served
}

/// What the client can do, from its capabilities.
#[derive(Clone, Copy, Debug)]
struct ClientSupport {
    encoding: Encoding,
    /// It pulls diagnostics (`textDocument/diagnostic`): none are pushed.
    pulls: bool,
    /// It re-pulls on `workspace/diagnostic/refresh` (after a configuration change).
    refresh: bool,
    /// It takes file watchers registered by the server.
    watches: bool,
    markdown: bool,
}

impl ClientSupport {
    /// What the `initialize` request's parameters say of the client; a client that sends
    /// what lsp-types cannot read is taken as one that supports nothing optional.
    fn of(params: &serde_json::Value) -> Self {
        let capabilities = serde_json::from_value::<InitializeParams>(params.clone())
            .map(|params| params.capabilities)
            .unwrap_or_default();
        let text = capabilities.text_document.as_ref();
        let workspace = capabilities.workspace.as_ref();
        Self {
            encoding: Encoding::negotiate(
                capabilities
                    .general
                    .as_ref()
                    .and_then(|general| general.position_encodings.as_deref()),
            ),
            pulls: text.is_some_and(|text| text.diagnostic.is_some()),
            // The specification names it `workspace.diagnostics`; lsp-types 0.97 reads
            // `workspace.diagnostic`, so it is read from the parameters as sent.
            refresh: params
                .pointer("/capabilities/workspace/diagnostics/refreshSupport")
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false),
            watches: workspace
                .and_then(|workspace| workspace.did_change_watched_files.as_ref())
                .and_then(|watched| watched.dynamic_registration)
                .unwrap_or(false),
            markdown: text
                .and_then(|text| text.hover.as_ref())
                .and_then(|hover| hover.content_format.as_ref())
                .is_some_and(|formats| formats.contains(&MarkupKind::Markdown)),
        }
    }
}

fn capabilities(encoding: Encoding) -> ServerCapabilities {
    ServerCapabilities {
        position_encoding: Some(encoding.kind()),
        text_document_sync: Some(TextDocumentSyncCapability::Options(
            TextDocumentSyncOptions {
                open_close: Some(true),
                change: Some(TextDocumentSyncKind::INCREMENTAL),
                save: Some(TextDocumentSyncSaveOptions::Supported(true)),
                ..TextDocumentSyncOptions::default()
            },
        )),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
            code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
            ..CodeActionOptions::default()
        })),
        diagnostic_provider: Some(DiagnosticServerCapabilities::Options(DiagnosticOptions {
            identifier: Some("kvlint".to_owned()),
            inter_file_dependencies: false,
            workspace_diagnostics: false,
            work_done_progress_options: Default::default(),
        })),
        ..ServerCapabilities::default()
    }
}

/// The configuration files whose changes make every open document be analysed again.
const CONFIGURATION_FILES: [&str; 2] = ["kvlint.toml", "pyproject.toml"];

struct Server {
    connection: Connection,
    args: Args,
    client: ClientSupport,
    /// Open documents by URI.
    documents: HashMap<String, Document>,
    configs: Discovery,
    /// The setup (tokenizer, chat template, engine) of each configuration, made once.
    setups: HashMap<Option<PathBuf>, Result<Arc<Setup>, String>>,
    /// Numbers analyses: the result id of pulled diagnostics.
    generation: u64,
}

enum Flow {
    Continue,
    Exit,
}

impl Server {
    fn serve(&mut self) -> miette::Result<()> {
        while let Ok(message) = self.connection.receiver.recv() {
            if let Flow::Exit = self.handle(message)? {
                return Ok(());
            }
            // Everything already waiting first (a burst of edits), then one analysis each.
            while let Ok(message) = self.connection.receiver.try_recv() {
                if let Flow::Exit = self.handle(message)? {
                    return Ok(());
                }
            }
            if !self.client.pulls {
                self.publish_changed();
            }
        }
        Ok(())
    }

    fn handle(&mut self, message: Message) -> miette::Result<Flow> {
        match message {
            Message::Request(request) => {
                if self
                    .connection
                    .handle_shutdown(&request)
                    .into_diagnostic()?
                {
                    return Ok(Flow::Exit);
                }
                let response = self.answer(request);
                self.send(response.into());
            }
            Message::Notification(notification) => {
                if notification.method == "exit" {
                    return Ok(Flow::Exit);
                }
                self.notified(notification);
            }
            // Answers to the server's own requests (registration, refresh): nothing to do.
            Message::Response(_) => {}
        }
        Ok(Flow::Continue)
    }

    fn send(&self, message: Message) {
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
    fn watch_configuration(&self) {
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
    fn analysis(&mut self, uri: &str) -> Option<(u64, Arc<Analysis>)> {
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

    /// Pushes the diagnostics of every document changed since they were last pushed.
    fn publish_changed(&mut self) {
        let changed: Vec<String> = self
            .documents
            .iter()
            .filter(|(_, document)| document.analysis.is_none())
            .map(|(uri, _)| uri.clone())
            .collect();
        for uri in changed {
            let Some((_, analysis)) = self.analysis(&uri) else {
                continue;
            };
            let (Some(document), Ok(parsed)) = (self.documents.get(&uri), uri.parse::<Uri>())
            else {
                continue;
            };
            let diagnostics = diagnostics(document, &analysis, &parsed);
            let version = document.version;
            self.publish(parsed, diagnostics, Some(version));
        }
    }

    fn publish(&self, uri: Uri, diagnostics: Vec<Diagnostic>, version: Option<i32>) {
        self.send(
            Notification::new(
                PublishDiagnostics::METHOD.to_owned(),
                PublishDiagnosticsParams {
                    uri,
                    diagnostics,
                    version,
                },
            )
            .into(),
        );
    }

    fn pulled(&mut self, params: &DocumentDiagnosticParams) -> DocumentDiagnosticReportResult {
        let uri = &params.text_document.uri;
        let report = match self.analysis(uri.as_str()) {
            Some((generation, _))
                if params.previous_result_id.as_deref() == Some(&generation.to_string()) =>
            {
                DocumentDiagnosticReport::Unchanged(RelatedUnchangedDocumentDiagnosticReport {
                    related_documents: None,
                    unchanged_document_diagnostic_report: UnchangedDocumentDiagnosticReport {
                        result_id: generation.to_string(),
                    },
                })
            }
            found => {
                let (result_id, items) = match (&found, self.documents.get(uri.as_str())) {
                    (Some((generation, analysis)), Some(document)) => (
                        Some(generation.to_string()),
                        diagnostics(document, analysis, uri),
                    ),
                    // Not open: nothing to say of it.
                    _ => (None, Vec::new()),
                };
                DocumentDiagnosticReport::Full(RelatedFullDocumentDiagnosticReport {
                    related_documents: None,
                    full_document_diagnostic_report: FullDocumentDiagnosticReport {
                        result_id,
                        items,
                    },
                })
            }
        };
        DocumentDiagnosticReportResult::Report(report)
    }

    fn hover(&mut self, params: &HoverParams) -> Option<Hover> {
        let uri = params
            .text_document_position_params
            .text_document
            .uri
            .as_str();
        let (_, analysis) = self.analysis(uri)?;
        let document = self.documents.get(uri)?;
        let offset = document.lines.offset(
            &document.text,
            params.text_document_position_params.position,
        );
        let hits: Vec<&Placed> = analysis
            .findings
            .iter()
            .filter(|placed| placed.range.start <= offset && offset <= placed.range.end)
            .collect();
        let first = hits.first()?;
        let text = hits
            .iter()
            .map(|placed| hover_text(placed))
            .collect::<Vec<_>>()
            .join("\n\n---\n\n");
        Some(Hover {
            contents: HoverContents::Markup(MarkupContent {
                kind: if self.client.markdown {
                    MarkupKind::Markdown
                } else {
                    MarkupKind::PlainText
                },
                value: text,
            }),
            range: Some(document.lines.range(&document.text, &first.range)),
        })
    }

    fn code_actions(&mut self, params: &ActionsAsked) -> Vec<CodeActionOrCommand> {
        let uri = &params.text_document.uri;
        let Some((_, analysis)) = self.analysis(uri.as_str()) else {
            return Vec::new();
        };
        let Some(document) = self.documents.get(uri.as_str()) else {
            return Vec::new();
        };
        let config = self.configs.for_file(&document.path).ok().flatten();
        let start = document.lines.offset(&document.text, params.range.start);
        let end = document.lines.offset(&document.text, params.range.end);
        let sessions = actions::Sessions::of(document);
        let mut actions: Vec<CodeActionOrCommand> = Vec::new();
        for placed in analysis
            .findings
            .iter()
            .filter(|placed| placed.range.start <= end && start <= placed.range.end)
        {
            for fix in actions::fixes(document, &analysis, placed, config.as_ref(), &sessions) {
                let duplicate = actions.iter().any(|action| {
                    matches!(action, CodeActionOrCommand::CodeAction(action) if action.title == fix.title)
                });
                if duplicate {
                    continue;
                }
                let edits = fix
                    .edits
                    .iter()
                    .map(|(range, new_text)| TextEdit {
                        range: document.lines.range(&document.text, range),
                        new_text: new_text.clone(),
                    })
                    .collect();
                actions.push(CodeActionOrCommand::CodeAction(CodeAction {
                    title: fix.title,
                    kind: Some(CodeActionKind::QUICKFIX),
                    diagnostics: Some(vec![diagnostic(document, placed, uri)]),
                    edit: Some(WorkspaceEdit {
                        changes: Some(HashMap::from([(uri.clone(), edits)])),
                        ..WorkspaceEdit::default()
                    }),
                    is_preferred: Some(fix.preferred),
                    ..CodeAction::default()
                }));
            }
        }
        actions
    }
}

/// What a `textDocument/codeAction` request asks that the server reads: the fixes come from
/// the server's own findings, so the context's diagnostics (which clients send in varied
/// shapes, Neovim 0.7 without their ranges) are not read.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ActionsAsked {
    text_document: TextDocumentIdentifier,
    range: lsp_types::Range,
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

/// Every diagnostic of a document: its findings, then what kept it from being analysed.
fn diagnostics(document: &Document, analysis: &Analysis, uri: &Uri) -> Vec<Diagnostic> {
    let problems = analysis.problems.iter().map(|problem| Diagnostic {
        range: document.lines.range(&document.text, &problem.range),
        severity: Some(DiagnosticSeverity::ERROR),
        source: Some("kvlint".to_owned()),
        message: problem.message.clone(),
        ..Diagnostic::default()
    });
    analysis
        .findings
        .iter()
        .map(|placed| diagnostic(document, placed, uri))
        .chain(problems)
        .collect()
}

fn diagnostic(document: &Document, placed: &Placed, uri: &Uri) -> Diagnostic {
    let finding = &placed.finding;
    let related = placed.previous_turn.map(|offset| {
        vec![DiagnosticRelatedInformation {
            location: Location {
                uri: uri.clone(),
                range: document.lines.range(&document.text, &(offset..offset)),
            },
            message: format!(
                "turn {}: the same part, as the cache holds it",
                finding.turn
            ),
        }]
    });
    Diagnostic {
        range: document.lines.range(&document.text, &placed.range),
        severity: Some(match finding.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
            Severity::Info => DiagnosticSeverity::INFORMATION,
        }),
        code: Some(NumberOrString::String(finding.code.to_owned())),
        code_description: kvlint_rules::rule(finding.rule)
            .and_then(|rule| rule.meta().url().parse().ok())
            .map(|href| CodeDescription { href }),
        source: Some("kvlint".to_owned()),
        message: format!("{} ({})", finding.message, finding.rule),
        related_information: related,
        tags: None,
        data: Some(serde_json::json!({ "rule": finding.rule })),
    }
}

/// What hovering over a finding shows: the rule, the tokens lost, the diverging token
/// windows of the turn before and this one, the help and the documentation's link.
fn hover_text(placed: &Placed) -> String {
    let finding = &placed.finding;
    let mut text = format!(
        "**{} {}** ({})",
        finding.code,
        finding.rule,
        finding.severity.as_str()
    );
    if finding.tokens_lost > 0 {
        text.push_str(&format!(": {} tokens lost", finding.tokens_lost));
    }
    text.push_str(&format!("\n\n{}", finding.message));
    if !finding.previous_window.is_empty() || !finding.current_window.is_empty() {
        text.push_str(&format!(
            "\n\nturn {} (cached):\n{}\nturn {} (sent):\n{}",
            finding.turn,
            fenced(&finding.previous_window),
            finding.turn + 1,
            fenced(&finding.current_window)
        ));
    }
    if !finding.help.is_empty() {
        text.push_str(&format!("\n\nhelp: {}", finding.help));
    }
    if let Some(rule) = kvlint_rules::rule(finding.rule) {
        text.push_str(&format!(
            "\n\n[{} documentation]({})",
            rule.meta().name,
            rule.meta().url()
        ));
    }
    text
}

/// `text` in a fenced block whose fence is longer than any run of backticks in it.
fn fenced(text: &str) -> String {
    let longest = text
        .split(|character| character != '`')
        .map(str::len)
        .max()
        .unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}text\n{text}\n{fence}")
}
