//! `kvlint template`: model chat templates checked for prefix breaks before any traffic.

use std::path::PathBuf;

use chrono::NaiveDateTime;
use kvlint_core::diagnostic::Diagnostic;
use kvlint_core::error::InputError;
use kvlint_core::template::ChatTemplate;
use kvlint_core::template_check::check_template;
use serde::Serialize;

use crate::report::REPORT_VERSION;

#[derive(Debug, Serialize)]
pub struct TemplateReport {
    pub version: u32,
    pub templates: Vec<TemplateResult>,
    pub errors: Vec<crate::report::ErrorReport>,
    #[serde(skip)]
    pub input_errors: Vec<InputError>,
}

#[derive(Debug, Serialize)]
pub struct TemplateResult {
    pub path: String,
    pub findings: Vec<Diagnostic>,
}

/// Checks each chat template (a Jinja file or a `tokenizer_config.json`); `special_tokens`
/// names a tokenizer config whose bos/eos a bare Jinja template is rendered with.
pub fn check_templates(
    paths: &[PathBuf],
    special_tokens: Option<&PathBuf>,
    now: NaiveDateTime,
) -> TemplateReport {
    let mut report = TemplateReport {
        version: REPORT_VERSION,
        templates: Vec::new(),
        errors: Vec::new(),
        input_errors: Vec::new(),
    };
    for path in paths {
        let checked = ChatTemplate::from_file(path, now)
            .and_then(|template| match special_tokens {
                Some(config) => template.with_special_tokens_from(config),
                None => Ok(template),
            })
            .and_then(|template| check_template(&template, now));
        match checked {
            Ok(breaks) => report.templates.push(TemplateResult {
                path: path.display().to_string(),
                findings: breaks.iter().map(kvlint_rules::diagnose_template).collect(),
            }),
            Err(error) => {
                report.errors.push(crate::report::ErrorReport {
                    path: error.path().to_owned(),
                    message: error.to_string(),
                });
                report.input_errors.push(error);
            }
        }
    }
    report
}
