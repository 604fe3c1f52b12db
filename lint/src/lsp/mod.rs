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
//!   bytes it changed in the turn before as related information (turns counted from 0, as
//!   every output counts them);
//! - hover over a finding: the diverging token windows of both turns and the tokens lost;
//! - code actions where the fix is mechanical (see [`actions`]).
//!
//! Changes arrive as edits (incremental document sync). Messages already waiting are handled
//! before a changed document is analysed again, so a burst of edits costs one analysis; an
//! edit to a session file is analysed from the turn before the first one it touches (see
//! [`document::Analysis::of_session_edit`]).
//!
//! - `server`: the message loop, notifications, configuration, the analysis of a document;
//! - `diagnostics`: findings as diagnostics, pushed or pulled; `hover`: a finding's token
//!   windows; `quick_fix`: [`actions`]' fixes as code actions.

mod actions;
mod diagnostics;
mod document;
mod hover;
mod position;
mod quick_fix;
mod server;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use kvlint_core::cache::Engine;
use lsp_server::Connection;
use lsp_types::{
    CodeActionKind, CodeActionOptions, CodeActionProviderCapability, DiagnosticOptions,
    DiagnosticServerCapabilities, HoverProviderCapability, InitializeParams, InitializeResult,
    MarkupKind, ServerCapabilities, ServerInfo, TextDocumentSyncCapability, TextDocumentSyncKind,
    TextDocumentSyncOptions, TextDocumentSyncSaveOptions,
};
use miette::IntoDiagnostic;

use self::document::Document;
use self::position::Encoding;
use crate::workspace::check::Setup;
use crate::workspace::config::Discovery;
use crate::workspace::render::RenderArgs;

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

/// Serves one client over stdin and stdout until it sends `exit` or closes the stream, and
/// returns the process's exit code: 1 for an `exit` that no `shutdown` preceded, as the
/// protocol says, else 0.
pub fn serve(args: Args) -> miette::Result<u8> {
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
