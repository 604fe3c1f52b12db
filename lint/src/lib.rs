//! `kvlint`, the command line: finds what breaks the prompt cache of LLM agents.
//!
//! [`run`] parses arguments, runs one command (`commands/`) and prints its output; the
//! analysis itself is `kvlint_rules::check_session` / `check_pair`. The `kvlint` binary calls
//! it, and so does the Python package's `kvlint` command (in-process, through its native
//! module).

// Printing the output is the command line's job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::IsTerminal;
use std::path::Path;

use clap::{Parser, Subcommand};

mod commands;
mod emit;
mod engine_client;
mod input;
mod lsp;
mod probe;
mod proxy;
mod report;
mod workspace;

use commands::{EXIT_INPUT, Outcome};
use emit::Terminal;

#[derive(Debug, Parser)]
#[command(
    name = "kvlint",
    version,
    about = "Find what breaks the prompt cache of LLM agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check recorded sessions: consecutive request bodies of one agent session per file.
    Check(commands::check::Args),
    /// Compare two single requests token by token.
    Diff(commands::diff::Args),
    /// Print exactly what the engine prefills for each turn of sessions: text and token ids
    /// (with --chat-template, as vLLM parses and renders each request).
    Render(commands::render::Args),
    /// Check templates: model chat templates (Jinja, tokenizer_config.json) are rendered turn
    /// by turn and on another day; application prompt templates (Jinja, Mustache, Handlebars,
    /// format strings, Dotprompt, Prompty) are checked for volatile variables before stable text.
    Template(commands::template::Args),
    /// Replay sessions against a live OpenAI-compatible engine and compare what it serves from
    /// cache with kvlint's prediction, turn by turn.
    Probe(commands::probe::Args),
    /// Sit between an agent and its engine: pass requests and responses through unchanged,
    /// record sessions, and count prompt tokens computed and served from cache, live.
    Proxy(commands::proxy::Args),
    /// Measure the reuse a workload of sessions creates (within and across sessions, its
    /// distributions, what its findings cost), or export a benchmark dataset of its shape.
    Workload(commands::workload::Args),
    /// Replay a workload through N replicas with engine-modelled prefix caches under routing
    /// policies: served vs computed tokens, locality, evictions, load, time to first token.
    Simulate(commands::simulate::Args),
    /// Write the sessions a recording holds (a VCR cassette, a HAR file, an Inspect log) as
    /// session files, one request body per line.
    #[cfg(feature = "recordings")]
    Import(commands::import::Args),
    /// Run the language server over stdin and stdout: findings in templates and sessions as
    /// they are edited, hover, code actions.
    Lsp(lsp::Args),
    /// Write a starter kvlint.toml in the current folder.
    Init,
    /// Print the JSON schema of kvlint.toml.
    #[command(hide = true)]
    Schema,
    /// Print a rule's documentation, or list all rules.
    Rule(commands::rule::Args),
    /// Print the hosted APIs' caching figures (minimum cacheable prompt, prices, cache
    /// breakpoints), each with the page it was read from, a quote and the date.
    Models(commands::models::Args),
}

/// Runs the command line `args` (the first is the program's name) and returns its exit code:
/// 0 clean, 1 findings, 2 usage or input error.
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
            // A usage error quotes the argument it could not take: a file name from a pull
            // request, shown through the same guard as everything else.
            let to_stderr = error.use_stderr();
            let color = to_stderr
                && std::io::stderr().is_terminal()
                && std::env::var_os("NO_COLOR").is_none();
            let rendered = error.render();
            let rendered = if color {
                rendered.ansi().to_string()
            } else {
                rendered.to_string()
            };
            let shown = emit::terminal_safe(rendered, color);
            if to_stderr {
                eprint!("{shown}");
                return EXIT_INPUT;
            }
            print!("{shown}");
            return 0;
        }
    };
    match run_command(cli) {
        Ok(outcome) => {
            print!("{}", outcome.output);
            outcome.exit_code
        }
        Err(error) => {
            // Through the same guard as reports: the error may name a path from a pull request.
            let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            let error = input::in_command_words(error);
            eprintln!("{}", emit::terminal_safe(format!("{error:?}"), color));
            EXIT_INPUT
        }
    }
}

fn terminal() -> Terminal {
    Terminal {
        color: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        width: std::env::var("COLUMNS")
            .ok()
            .and_then(|columns| columns.parse().ok())
            .unwrap_or(100),
    }
}

fn run_command(cli: Cli) -> miette::Result<Outcome> {
    let printed = |output: String| Outcome {
        output,
        exit_code: 0,
    };
    match cli.command {
        Command::Check(args) => commands::check::run(args, terminal()),
        Command::Diff(args) => commands::diff::run(args, terminal()),
        Command::Render(args) => commands::render::run(args, terminal()),
        Command::Template(args) => commands::template::run(args, terminal()),
        Command::Probe(args) => commands::probe::run(args, terminal()),
        Command::Proxy(args) => commands::proxy::run(args),
        Command::Rule(args) => commands::rule::run(args),
        Command::Models(args) => commands::models::run(args),
        #[cfg(feature = "recordings")]
        Command::Import(args) => commands::import::run(args, terminal()),
        Command::Workload(args) => commands::workload::run(args),
        Command::Simulate(args) => commands::simulate::run(args),
        Command::Lsp(args) => Ok(Outcome {
            output: String::new(),
            exit_code: lsp::serve(args)?,
        }),
        Command::Init => {
            let path = workspace::config::init(Path::new("."))?;
            Ok(printed(format!("wrote {}\n", path.display())))
        }
        Command::Schema => Ok(printed(workspace::config::schema())),
    }
}
