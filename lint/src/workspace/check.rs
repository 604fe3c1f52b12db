//! How a file is checked under the configuration that applies to it: the one setup of a
//! session's renderer and cache model, and the check of one session or one template text,
//! which `kvlint check`, `kvlint template` and `kvlint lsp` all run.

use std::path::{Path, PathBuf};

use chrono::NaiveDateTime;
use kvlint_core::cache::{Engine, Opening, audit_cold_starts};
use kvlint_core::prompt_template::{
    TemplateSyntax, check_prompt_template, check_template_syntax, ignored_rules,
};
use kvlint_core::session::SessionFile;
use kvlint_render::render::Renderer;
use kvlint_render::template::{ChatTemplate, is_chat_template};
use kvlint_render::template_check::check_template;
use kvlint_render::tokenize::Tokenizer;
use kvlint_request::diagnostic::Diagnostic;
use kvlint_request::locate::Locator;
use kvlint_request::path::PartPath;
use kvlint_rules::RuleInput;
use kvlint_rules::thinking::Account;
use miette::WrapErr;

use super::config::Config;
use super::render::{RenderArgs, serving_engine};
use crate::report::template::TemplateResult;
use crate::report::{CacheOptions, ErrorReport, SessionReport};

/// How the sessions under one configuration are checked: flags first, the configuration's
/// defaults (engine, tokenizer, chat template, template limits) where a flag is unset.
pub(crate) struct Setup {
    renderer: Renderer,
    options: CacheOptions,
}

impl Setup {
    /// Whether an engine's cache use is predicted: that follows the whole session, turn by
    /// turn.
    pub(crate) fn predicts_cache(&self) -> bool {
        self.options.engine.is_some()
    }

    /// The setup of the render flags and engine given, under `config`.
    pub(crate) fn of(
        render: &RenderArgs,
        engine: Option<&Engine>,
        prefill_tps: Option<f64>,
        config: Option<&Config>,
    ) -> miette::Result<Self> {
        let mut render = render.clone();
        let mut engine = engine.cloned();
        let mut account = Account::Unknown;
        if let Some(config) = config {
            account = anthropic_account(config)?;
            render.apply_defaults(config);
            if engine.is_none()
                && let Some(spec) = &config.options.engine
            {
                engine = Some(
                    spec.parse()
                        .map_err(miette::Report::new)
                        .wrap_err(format!("in {}", config.path.display()))?,
                );
            }
        }
        Ok(Self {
            renderer: render.renderer(serving_engine(engine.as_ref()))?,
            options: CacheOptions {
                engine,
                prefill_tokens_per_second: prefill_tps,
                account,
            },
        })
    }
}

/// The Anthropic account `config` says the sessions run on.
pub(crate) fn anthropic_account(config: &Config) -> miette::Result<Account> {
    let Some(date) = &config.options.anthropic_account_created else {
        return Ok(Account::Unknown);
    };
    Account::created_on(date).ok_or_else(|| {
        miette::miette!(
            help = "write the day the account was created, such as \"2026-05-14\"",
            "in {}: `anthropic-account-created` must be a date YYYY-MM-DD, found {date:?}",
            config.path.display()
        )
    })
}

/// Checks the sessions of one file (a recording holds several) under its configuration:
/// each session, then what only the sessions together show (rule `cold-start`).
pub(crate) fn check_sessions(
    sessions: &[SessionFile],
    config: Option<&Config>,
    setup: &Setup,
) -> Vec<Result<SessionReport, ErrorReport>> {
    let mut reports: Vec<Result<SessionReport, ErrorReport>> = sessions
        .iter()
        .map(|session| {
            SessionReport::new(session, &setup.renderer, &setup.options).map_err(Into::into)
        })
        .collect();
    if let Some(engine) = &setup.options.engine {
        let prefill_tps = setup.options.prefill_tokens_per_second;
        add_cold_starts(engine, prefill_tps, sessions, &mut reports);
        for report in reports.iter_mut().flatten() {
            report.name_warm_hit();
        }
    }
    if let Some(config) = config {
        for report in reports.iter_mut().flatten() {
            report.apply_config(config);
        }
    }
    reports
}

/// What the sessions read from each other's cache entries, and those that start cold on a
/// prefix an earlier one sent.
fn add_cold_starts(
    engine: &Engine,
    prefill_tps: Option<f64>,
    sessions: &[SessionFile],
    reports: &mut [Result<SessionReport, ErrorReport>],
) {
    // Taken: the audit is their only reader.
    let openings: Vec<Option<Opening>> = reports
        .iter_mut()
        .map(|report| {
            report
                .as_mut()
                .ok()
                .and_then(|report| report.opening.take())
        })
        .collect();
    let audit = audit_cold_starts(engine, &openings);
    for (session, read) in audit.reads {
        if let Some(Ok(report)) = reports.get_mut(session) {
            report.read_at_opening(read, engine, prefill_tps);
        }
    }
    for issue in audit.cold_starts {
        let session = &sessions[issue.session];
        let span = session
            .locate(0, &PartPath::root(), 0)
            .map(|start| session.span(start, start + 1));
        let finding = kvlint_rules::diagnose(&RuleInput::Cold {
            issue: &issue,
            span,
        });
        if let Some(Ok(report)) = reports.get_mut(issue.session) {
            report.add_findings(finding);
        }
    }
}

/// Checks one parsed session under its configuration.
pub(crate) fn check_session(
    session: &SessionFile,
    config: Option<&Config>,
    setup: &Setup,
) -> Result<SessionReport, ErrorReport> {
    let mut report = SessionReport::new(session, &setup.renderer, &setup.options)?;
    if let Some(config) = config {
        report.apply_config(config);
    }
    Ok(report)
}

/// Checks the text of one template file (`path` says what kind of template it is) under its
/// configuration; prompt templates' stable text is counted in `tokenizer`'s tokens.
pub(crate) fn check_template_text(
    path: &Path,
    text: String,
    config: Option<&Config>,
    special_tokens: Option<&PathBuf>,
    now: NaiveDateTime,
    tokenizer: &Tokenizer,
) -> Result<TemplateResult, ErrorReport> {
    let display = path.display().to_string();
    // A tokenizer config, or Jinja that renders a conversation as a chat template does (judged
    // by its syntax tree, not by the words of its text); Mustache, Handlebars, Dotprompt,
    // Prompty and format-string files are application templates whatever they read.
    let extension = path
        .extension()
        .and_then(|extension| extension.to_str())
        .unwrap_or_default();
    let is_config = extension == "json";
    let is_jinja = matches!(extension, "jinja" | "j2" | "jinja2");
    let is_chat = is_config || (is_jinja && is_chat_template(&text));
    // Suppression comments are read from template text; a tokenizer config holds its
    // template as a JSON string, where they are not looked for.
    let ignored = if is_config {
        Vec::new()
    } else {
        ignored_rules(&text)
    };
    let mut notes = Vec::new();
    let (kind, findings): (_, Vec<Diagnostic>) = if is_chat {
        let limits = config
            .map(|config| config.options.template_limits.limits())
            .unwrap_or_default();
        let checked = ChatTemplate::from_text(path, text.clone(), now)
            .map(|template| template.with_limits(limits))
            .and_then(|template| match special_tokens {
                Some(config) => template.with_special_tokens_from(config),
                // A bare Jinja file has no special tokens: name them as placeholders.
                None if !is_config => Ok(template.with_placeholder_special_tokens()),
                None => Ok(template),
            })
            .and_then(|template| check_template(&template, now).map_err(Into::into))?;
        notes = checked.notes.iter().map(ToString::to_string).collect();
        let findings = checked
            .breaks
            .iter()
            .filter_map(|found| kvlint_rules::diagnose(&RuleInput::TemplateBreak(found)))
            .collect();
        ("chat", findings)
    } else {
        check_template_syntax(&display, &text)?;
        let syntax = TemplateSyntax::for_file(&display).unwrap_or(TemplateSyntax::Braces);
        let volatile = config
            .map(|config| config.options.volatile.clone())
            .unwrap_or_default();
        let findings = check_prompt_template(&text, syntax, &volatile, tokenizer)
            .iter()
            .filter_map(|placement| {
                kvlint_rules::diagnose(&RuleInput::Placement {
                    placement,
                    template: &text,
                })
            })
            .collect();
        ("prompt", findings)
    };
    let findings = findings
        .into_iter()
        .filter(|finding| !ignored.iter().any(|rule| rule == finding.rule))
        .collect();
    let findings = match config {
        Some(config) => config.apply(path, findings),
        None => findings,
    };
    Ok(TemplateResult {
        path: display,
        kind,
        findings,
        notes,
        source: text,
    })
}
