//! `kvlint template`: model chat templates checked for prefix breaks before any traffic.

use std::path::PathBuf;

use chrono::NaiveDateTime;
use std::sync::Arc;

use kvlint_core::analysis::TurnDiff;
use kvlint_core::diagnostic::{Diagnostic, SeverityCounts};
use kvlint_core::error::InputError;
use kvlint_core::prompt_template::{TemplateSyntax, check_prompt_template, ignored_rules};
use kvlint_core::template::ChatTemplate;
use kvlint_core::template_check::check_template;
use kvlint_core::tokenize::Tokenizer;
use serde::Serialize;

use crate::config::Discovery;
use crate::report::{REPORT_VERSION, Report, SessionReport, SessionSummary, TurnReport};

#[derive(Debug, Serialize)]
pub struct TemplateReport {
    pub version: u32,
    pub templates: Vec<TemplateResult>,
    pub errors: Vec<crate::report::ErrorReport>,
    #[serde(skip)]
    pub input_errors: Vec<Box<dyn miette::Diagnostic + Send + Sync>>,
}

#[derive(Debug, Serialize)]
pub struct TemplateResult {
    pub path: String,
    /// `chat` for a model's chat template, `prompt` for an application prompt template.
    pub kind: &'static str,
    pub findings: Vec<Diagnostic>,
    #[serde(skip)]
    pub source: String,
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
        input_errors: Vec::new(),
    };
    let tokenizer = Tokenizer::o200k_base();
    for path in template_files(paths) {
        let config = match configs.for_file(&path) {
            Ok(config) => config,
            Err(error) => {
                report.add_problem(error.path.clone(), error);
                continue;
            }
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(source) => {
                let error = InputError::Io {
                    path: path.display().to_string(),
                    source,
                };
                report.add_problem(error.path().to_owned(), error);
                continue;
            }
        };
        let display = path.display().to_string();
        let is_chat = path
            .extension()
            .is_some_and(|extension| extension == "json")
            || text.contains("messages");
        let (kind, findings) = if is_chat {
            let checked = ChatTemplate::from_file(&path, now)
                .and_then(|template| match special_tokens {
                    Some(config) => template.with_special_tokens_from(config),
                    None => Ok(template),
                })
                .and_then(|template| check_template(&template, now));
            match checked {
                Ok(breaks) => (
                    "chat",
                    breaks.iter().map(kvlint_rules::diagnose_template).collect(),
                ),
                Err(error) => {
                    report.add_problem(error.path().to_owned(), error);
                    continue;
                }
            }
        } else {
            let syntax = TemplateSyntax::for_file(&display).unwrap_or(TemplateSyntax::Braces);
            let volatile = config
                .as_ref()
                .map(|config| config.options.volatile.clone())
                .unwrap_or_default();
            let ignored = ignored_rules(&text);
            let findings = check_prompt_template(&text, syntax, &volatile, &tokenizer)
                .iter()
                .map(|placement| kvlint_rules::diagnose_placement(placement, &text))
                .filter(|finding| !ignored.iter().any(|rule| rule == finding.rule))
                .collect();
            ("prompt", findings)
        };
        let findings = match &config {
            Some(config) => config.apply(&path, findings),
            None => findings,
        };
        report.templates.push(TemplateResult {
            path: display,
            kind,
            findings,
            source: text,
        });
    }
    report
}

/// Named files as given; directories searched for templates, respecting .gitignore.
fn template_files(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for path in paths {
        if !path.is_dir() {
            files.push(path.clone());
            continue;
        }
        let mut found: Vec<PathBuf> = ignore::WalkBuilder::new(path)
            .build()
            .filter_map(Result::ok)
            .filter(|entry| entry.file_type().is_some_and(|kind| kind.is_file()))
            .map(ignore::DirEntry::into_path)
            .filter(|file| {
                let name = file
                    .file_name()
                    .map(|name| name.to_string_lossy())
                    .unwrap_or_default();
                name == "tokenizer_config.json"
                    || matches!(
                        file.extension().and_then(|extension| extension.to_str()),
                        Some("j2" | "jinja" | "jinja2" | "mustache" | "hbs" | "prompty" | "prompt")
                    )
            })
            .collect();
        found.sort();
        files.extend(found);
    }
    files
}

impl TemplateReport {
    /// The same findings as a check report, for the emitters that read one (SARIF, GitHub,
    /// JUnit): each template is a session whose turns are the conversation's turns.
    pub fn into_report(self) -> Report {
        let sessions = self
            .templates
            .into_iter()
            .map(|template| {
                let last_turn = template
                    .findings
                    .iter()
                    .map(|finding| finding.turn)
                    .max()
                    .unwrap_or(0);
                let summary = SessionSummary {
                    turns: last_turn + 1,
                    prompt_tokens: 0,
                    reused_tokens: 0,
                    reuse_ratio: 0.0,
                    findings: SeverityCounts::of(&template.findings),
                };
                let turns = (0..=last_turn)
                    .map(|index| TurnReport {
                        diff: TurnDiff {
                            index,
                            prompt_tokens: 0,
                            reused_tokens: 0,
                            first_divergence: None,
                        },
                        predicted_cached_tokens: None,
                        computed_tokens: None,
                        cache_write_tokens: None,
                        generated_not_reproduced: None,
                    })
                    .collect();
                SessionReport {
                    path: template.path,
                    format: format!("{}-template", template.kind),
                    renderer: String::new(),
                    approximate: false,
                    turns,
                    findings: template.findings,
                    summary,
                    cache: None,
                    source: Arc::from(template.source),
                }
            })
            .collect();
        Report {
            version: self.version,
            sessions,
            errors: self.errors,
            input_errors: self.input_errors,
        }
    }

    fn add_problem(
        &mut self,
        path: String,
        error: impl miette::Diagnostic + Send + Sync + 'static,
    ) {
        self.errors.push(crate::report::ErrorReport {
            path,
            message: error.to_string(),
        });
        self.input_errors.push(Box::new(error));
    }
}
