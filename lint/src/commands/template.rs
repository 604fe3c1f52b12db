//! `kvlint template`: model chat templates checked for prefix breaks before any traffic.

use std::path::{Path, PathBuf};

use chrono::NaiveDateTime;

use kvlint_core::prompt_template::{
    TemplateSyntax, check_prompt_template, check_template_syntax, ignored_rules,
};
use kvlint_render::template::{ChatTemplate, is_chat_template};
use kvlint_render::template_check::check_template;
use kvlint_render::tokenize::Tokenizer;
use kvlint_request::diagnostic::Diagnostic;
use kvlint_request::error::read_text;
use kvlint_rules::RuleInput;

use super::Outcome;
use crate::config::{Config, Discovery};
use crate::discover::template_files;
use crate::emit::{Output, OutputFormat, Terminal};
use crate::report::template::{TemplateReport, TemplateResult};
use crate::report::{ErrorReport, REPORT_VERSION};

#[derive(Debug, clap::Args)]
pub struct Args {
    pub paths: Vec<PathBuf>,
    /// A tokenizer_config.json whose bos/eos and other special tokens bare Jinja
    /// templates are rendered with.
    #[arg(long, value_name = "FILE")]
    pub special_tokens: Option<PathBuf>,
    /// The clock `strftime_now` reads first (the check also renders a day later).
    #[arg(long, value_name = "TIME", value_parser = super::parse_now)]
    pub now: Option<NaiveDateTime>,
    #[arg(long, value_enum, default_value = "human")]
    pub format: OutputFormat,
}

pub fn run(args: Args, terminal: Terminal) -> miette::Result<Outcome> {
    if args.paths.is_empty() {
        miette::bail!("`kvlint template` needs at least one chat template file");
    }
    let now = args
        .now
        .unwrap_or_else(|| chrono::Local::now().naive_local());
    let mut configs = Discovery::default();
    let report = check_templates(&args.paths, args.special_tokens.as_ref(), now, &mut configs);
    if report.templates.is_empty() && report.errors.is_empty() {
        let searched: Vec<String> = args
            .paths
            .iter()
            .map(|path| path.display().to_string())
            .collect();
        miette::bail!(
            help = "kvlint template reads tokenizer_config.json, *.jinja, *.j2, *.jinja2, *.mustache, *.hbs, *.prompt and *.prompty files",
            "no templates found in {}",
            searched.join(", ")
        );
    }
    Outcome::emitted(
        args.format,
        &Output::Template(&report),
        terminal,
        !report.errors.is_empty(),
        super::has_errors(
            report
                .templates
                .iter()
                .flat_map(|template| &template.findings),
        ),
    )
}

/// Checks each template file; directories are searched for templates.
pub fn check_templates(
    paths: &[PathBuf],
    special_tokens: Option<&PathBuf>,
    now: NaiveDateTime,
    configs: &mut Discovery,
) -> TemplateReport {
    let mut report = TemplateReport {
        version: REPORT_VERSION,
        templates: Vec::new(),
        errors: Vec::new(),
    };
    let tokenizer = Tokenizer::o200k_base();
    for path in template_files(paths)
        .into_iter()
        .map(|candidate| candidate.path)
    {
        let checked = configs
            .for_file(&path)
            .map_err(ErrorReport::from)
            .and_then(|config| {
                let text = read_text(&path)?;
                check_template_text(
                    &path,
                    text,
                    config.as_ref(),
                    special_tokens,
                    now,
                    &tokenizer,
                )
            });
        match checked {
            Ok(template) => report.templates.push(template),
            Err(error) => report.errors.push(error),
        }
    }
    report
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
