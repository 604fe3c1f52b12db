//! `kvlint template`: model chat templates checked for prefix breaks before any traffic.

use std::path::PathBuf;

use chrono::NaiveDateTime;

use kvlint_render::tokenize::Tokenizer;
use kvlint_request::error::read_text;

use super::Outcome;
use crate::emit::{Output, OutputFormat, Terminal};
use crate::report::template::TemplateReport;
use crate::report::{ErrorReport, REPORT_VERSION};
use crate::workspace::check::check_template_text;
use crate::workspace::config::Discovery;
use crate::workspace::discover::template_files;

#[derive(Debug, clap::Args)]
pub struct Args {
    pub paths: Vec<PathBuf>,
    /// A tokenizer_config.json whose bos/eos and other special tokens bare Jinja
    /// templates are rendered with.
    #[arg(long, value_name = "FILE")]
    pub special_tokens: Option<PathBuf>,
    /// The clock `strftime_now` reads first (the check also renders a day later).
    #[arg(long, value_name = "TIME", value_parser = crate::workspace::render::parse_now)]
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
