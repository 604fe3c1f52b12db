//! Configuration: `kvlint.toml`, or `[tool.kvlint]` in `pyproject.toml`, found upward from
//! each checked file. Unknown keys are errors that point at the key.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use kvlint_render::TemplateLimits;
use kvlint_request::diagnostic::{Diagnostic, Severity};
use kvlint_request::excerpt::without_controls;
use miette::{Diagnostic as MietteDiagnostic, NamedSource, SourceSpan};
use schemars::JsonSchema;
use serde::Deserialize;
use thiserror::Error;

/// The options a configuration file may set.
#[derive(Debug, Default, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Options {
    /// Rule levels by rule name: `off` drops a rule's findings, `warn` reports them as
    /// warnings at most, `error` keeps the severity the cost gives them.
    #[serde(default)]
    pub rules: BTreeMap<String, Level>,
    /// Rules ignored in files matching a glob, relative to the configuration file.
    #[serde(default)]
    pub per_file_ignores: BTreeMap<String, Vec<String>>,
    /// Variables of application prompt templates that change from turn to turn, besides
    /// the names kvlint knows (`now`, `request_id`, `steps_left`, ...).
    #[serde(default)]
    pub volatile: Vec<String>,
    /// Findings that lose fewer tokens than this are not reported.
    #[serde(default)]
    pub min_tokens_lost: usize,
    /// The default `--engine`.
    pub engine: Option<String>,
    /// The default `--tokenizer`, relative to the configuration file.
    pub tokenizer: Option<PathBuf>,
    /// The default `--chat-template`, relative to the configuration file.
    pub chat_template: Option<PathBuf>,
    /// Bounds on each render of a chat template, which ends as an input error past them.
    #[serde(default)]
    pub template_limits: TemplateLimitsOptions,
    /// When the Anthropic account the sessions run on was created (`YYYY-MM-DD`): from
    /// 2026-08-31 on, the API refuses a request whose returned thinking blocks fail their
    /// prefix check; older accounts let it through unless the request asks. Unset, a new
    /// account is assumed and `thinking-prefix-check` says so.
    pub anthropic_account_created: Option<String>,
}

/// `[template-limits]`: bounds on each render of a chat template. Unset keys keep the
/// defaults, generous for every real template.
#[derive(Debug, Default, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TemplateLimitsOptions {
    /// Work per render: one unit per instruction and per 64 bytes of data the template makes
    /// (which bounds its memory too). Default 10000000.
    pub fuel: Option<u64>,
    /// Bytes a template may print per byte of the conversation it renders. Default 16.
    pub output_per_input_byte: Option<usize>,
    /// Bytes a template may print on top of that. Default 1048576.
    pub output_headroom: Option<usize>,
    /// Nesting depth of loops, conditions and macro calls, at most 500 (the default).
    pub recursion: Option<usize>,
}

impl TemplateLimitsOptions {
    pub fn limits(&self) -> TemplateLimits {
        let default = TemplateLimits::default();
        TemplateLimits {
            fuel: self.fuel.unwrap_or(default.fuel),
            output_per_input_byte: self
                .output_per_input_byte
                .unwrap_or(default.output_per_input_byte),
            output_headroom: self.output_headroom.unwrap_or(default.output_headroom),
            recursion: self.recursion.unwrap_or(default.recursion),
        }
    }

    /// The key set to a value kvlint cannot use, and why.
    fn invalid(&self) -> Option<(&'static str, String)> {
        if self.fuel == Some(0) {
            return Some(("fuel", "fuel must be at least 1".into()));
        }
        match self.recursion {
            Some(depth) if depth == 0 || depth > TemplateLimits::MAX_RECURSION => Some((
                "recursion",
                format!(
                    "recursion must be between 1 and {}, the depth known to be safe on a thread's stack",
                    TemplateLimits::MAX_RECURSION
                ),
            )),
            _ => None,
        }
    }
}

/// A rule level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Off,
    Warn,
    Error,
}

/// A configuration file that could not be read.
#[derive(Debug, Error, MietteDiagnostic)]
#[error("{path}: {message}")]
#[diagnostic(
    code(kvlint::config),
    help("see kvlint.schema.json for the keys kvlint reads")
)]
pub struct ConfigError {
    pub path: String,
    pub message: String,
    #[source_code]
    pub source_code: NamedSource<String>,
    #[label("{message}")]
    pub span: Option<SourceSpan>,
}

/// A configuration file, loaded.
#[derive(Debug, Clone)]
pub struct Config {
    pub path: PathBuf,
    pub options: Options,
    ignores: Vec<(GlobSet, Vec<String>)>,
}

const FILE_NAME: &str = "kvlint.toml";
const STARTER: &str = concat!(
    "# kvlint configuration: ",
    env!("CARGO_PKG_REPOSITORY"),
    "#configuration\n",
    r#"# Rule levels: off | warn | error (error keeps the severity the cost gives a finding).
[rules]
# volatile-counter = "warn"

# Rules ignored in some files (globs relative to this file).
[per-file-ignores]
# "fixtures/legacy/**" = ["history-rewrite"]

# Defaults for `kvlint check`:
# engine = "vllm:block=16"
# tokenizer = "models/tokenizer.json"
# chat-template = "models/tokenizer_config.json"
"#
);

/// Writes a starter `kvlint.toml` in `directory`, never over an existing one.
pub fn init(directory: &Path) -> miette::Result<PathBuf> {
    let path = directory.join(FILE_NAME);
    if path.exists() {
        miette::bail!(
            "{} exists already; kvlint init does not overwrite it",
            path.display()
        );
    }
    std::fs::write(&path, STARTER)
        .map_err(|error| miette::miette!("cannot write {}: {error}", path.display()))?;
    Ok(path)
}

impl Config {
    fn parse(path: &Path, text: &str, in_pyproject: bool) -> Result<Option<Self>, ConfigError> {
        // A configuration comes from a pull request too: nothing in it reaches the terminal raw.
        let error = |message: String, span: Option<SourceSpan>| ConfigError {
            path: path.display().to_string(),
            message: without_controls(&message),
            source_code: NamedSource::new(path.display().to_string(), without_controls(text))
                .with_language("toml"),
            span,
        };
        let options: Option<Options> = if in_pyproject {
            #[derive(Deserialize)]
            struct Pyproject {
                tool: Option<Tool>,
            }
            #[derive(Deserialize)]
            struct Tool {
                kvlint: Option<Options>,
            }
            toml::from_str::<Pyproject>(text)
                .map(|pyproject| pyproject.tool.and_then(|tool| tool.kvlint))
                .map_err(|problem| {
                    error(
                        problem.message().to_owned(),
                        problem.span().map(SourceSpan::from),
                    )
                })?
        } else {
            Some(toml::from_str(text).map_err(|problem| {
                error(
                    problem.message().to_owned(),
                    problem.span().map(SourceSpan::from),
                )
            })?)
        };
        let Some(options) = options else {
            return Ok(None);
        };
        let known: Vec<&str> = kvlint_rules::RULES
            .iter()
            .map(|rule| rule.meta().name)
            .collect();
        let unknown_rule = options
            .rules
            .keys()
            .chain(options.per_file_ignores.values().flatten())
            .find(|name| !known.contains(&name.as_str()));
        if let Some(name) = unknown_rule {
            let span = text
                .find(name.as_str())
                .map(|at| SourceSpan::from((at, name.len())));
            return Err(error(format!("unknown rule `{name}`"), span));
        }
        if let Some(spec) = &options.engine
            && let Err(problem) = spec.parse::<kvlint_core::cache::Engine>()
        {
            return Err(error(problem.to_string(), value_span(text, "engine")));
        }
        if let Some(tokenizer) = &options.tokenizer {
            // Resolved as `resolve` does, against the configuration's folder.
            let resolved = path
                .parent()
                .map_or_else(|| tokenizer.clone(), |folder| folder.join(tokenizer));
            if !resolved.is_file() {
                let message = format!(
                    "tokenizer `{}`: no such file ({}: paths are read from this file's folder)",
                    tokenizer.display(),
                    resolved.display()
                );
                return Err(error(message, value_span(text, "tokenizer")));
            }
        }
        if let Some((key, message)) = options.template_limits.invalid() {
            // The key in its table (`[template-limits]`, `[tool.kvlint.template-limits]`).
            let table = text.find("template-limits").unwrap_or(0);
            let span = text[table..]
                .find(key)
                .map(|at| SourceSpan::from((table + at, key.len())));
            return Err(error(message, span));
        }
        let mut ignores = Vec::new();
        for (pattern, rules) in &options.per_file_ignores {
            let glob = Glob::new(pattern).map_err(|problem| {
                let span = text
                    .find(pattern.as_str())
                    .map(|at| SourceSpan::from((at, pattern.len())));
                error(format!("invalid glob `{pattern}`: {problem}"), span)
            })?;
            let set = GlobSetBuilder::new()
                .add(glob)
                .build()
                .map_err(|problem| error(problem.to_string(), None))?;
            ignores.push((set, rules.clone()));
        }
        Ok(Some(Self {
            path: path.to_path_buf(),
            options,
            ignores,
        }))
    }

    fn read(path: &Path, in_pyproject: bool) -> Result<Option<Self>, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|problem| ConfigError {
            path: path.display().to_string(),
            message: problem.to_string(),
            source_code: NamedSource::new(path.display().to_string(), String::new()),
            span: None,
        })?;
        Self::parse(path, &text, in_pyproject)
    }

    /// A path from the configuration file, resolved against its folder.
    pub fn resolve(&self, path: &Path) -> PathBuf {
        self.path
            .parent()
            .map_or_else(|| path.to_path_buf(), |folder| folder.join(path))
    }

    /// Applies rule levels, per-file ignores and the threshold to a file's findings.
    pub fn apply(&self, file: &Path, findings: Vec<Diagnostic>) -> Vec<Diagnostic> {
        let relative = self
            .path
            .parent()
            .and_then(|folder| {
                absolute(file)
                    .strip_prefix(absolute(folder))
                    .ok()
                    .map(Path::to_path_buf)
            })
            .unwrap_or_else(|| file.to_path_buf());
        let ignored: Vec<&String> = self
            .ignores
            .iter()
            .filter(|(set, _)| set.is_match(&relative))
            .flat_map(|(_, rules)| rules)
            .collect();
        findings
            .into_iter()
            .filter(|finding| !ignored.iter().any(|rule| *rule == finding.rule))
            .filter(|finding| {
                finding.tokens_lost >= self.options.min_tokens_lost || finding.tokens_lost == 0
            })
            .filter_map(|mut finding| match self.options.rules.get(finding.rule) {
                Some(Level::Off) => None,
                Some(Level::Warn) => {
                    finding.severity = finding.severity.min(Severity::Warning);
                    Some(finding)
                }
                _ => Some(finding),
            })
            .collect()
    }
}

/// The span of the value a top-level `key = value` line sets (the first such line), for an
/// error about that value.
fn value_span(text: &str, key: &str) -> Option<SourceSpan> {
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        let assigned = line
            .trim_start()
            .strip_prefix(key)
            .and_then(|rest| rest.trim_start().strip_prefix('='));
        if let Some(assigned) = assigned {
            let value_start = line_start + line.len() - assigned.trim_start().len();
            return Some(SourceSpan::from((value_start, assigned.trim().len())));
        }
        line_start += line.len();
    }
    None
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Finds the configuration of each checked file, upward from its folder; caches by folder.
#[derive(Debug, Default)]
pub struct Discovery {
    by_folder: HashMap<PathBuf, Option<Config>>,
}

impl Discovery {
    pub fn for_file(&mut self, file: &Path) -> Result<Option<Config>, ConfigError> {
        let start = absolute(file);
        let folder = start
            .parent()
            .map_or_else(|| start.clone(), Path::to_path_buf);
        self.for_folder(&folder)
    }

    /// The configuration that applies in `folder`.
    pub fn for_folder(&mut self, folder: &Path) -> Result<Option<Config>, ConfigError> {
        if let Some(found) = self.by_folder.get(folder) {
            return Ok(found.clone());
        }
        let here = folder.join(FILE_NAME);
        let pyproject = folder.join("pyproject.toml");
        let found = if here.is_file() {
            Config::read(&here, false)?
        } else if pyproject.is_file()
            && let Some(config) = Config::read(&pyproject, true)?
        {
            Some(config)
        } else {
            match folder.parent() {
                Some(parent) => self.for_folder(parent)?,
                None => None,
            }
        };
        self.by_folder.insert(folder.to_path_buf(), found.clone());
        Ok(found)
    }
}

/// The JSON schema of the configuration, as committed in `kvlint.schema.json`.
pub fn schema() -> String {
    let schema = schemars::schema_for!(Options);
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_and_rules_point_at_the_place() {
        let error = Config::parse(
            Path::new("kvlint.toml"),
            "min-tokens-lost = 3\nengines = \"x\"\n[rules]\n",
            false,
        )
        .unwrap_err();
        assert!(
            error.message.contains("unknown field `engines`"),
            "{}",
            error.message
        );
        assert_eq!(error.span.map(|span| span.offset()), Some(20));
        let error = Config::parse(
            Path::new("kvlint.toml"),
            "[rules]\nprefix-edit = \"loud\"\n",
            false,
        )
        .unwrap_err();
        assert!(
            error.message.contains("unknown variant `loud`"),
            "{}",
            error.message
        );
        let error = Config::parse(
            Path::new("kvlint.toml"),
            "[rules]\nno-such-rule = \"off\"\n",
            false,
        )
        .unwrap_err();
        assert_eq!(error.message, "unknown rule `no-such-rule`");
        assert_eq!(error.span.map(|span| span.offset()), Some(8));
    }

    #[test]
    fn an_engine_or_tokenizer_kvlint_cannot_use_points_at_its_value() {
        let text = "min-tokens-lost = 3\nengine = \"vllm:block=0\"\n";
        let error = Config::parse(Path::new("kvlint.toml"), text, false).unwrap_err();
        assert!(
            error.message.contains("`block` must be a positive integer"),
            "{}",
            error.message
        );
        assert_eq!(
            error.span.map(|span| (span.offset(), span.len())),
            Some((29, 14))
        );
        let text = "[tool.kvlint]\ntokenizer = \"nowhere/tokenizer.json\"\n";
        let error = Config::parse(Path::new("pyproject.toml"), text, true).unwrap_err();
        assert!(
            error
                .message
                .contains("tokenizer `nowhere/tokenizer.json`: no such file"),
            "{}",
            error.message
        );
        assert_eq!(error.span.map(|span| span.offset()), Some(26));
    }

    #[test]
    fn pyproject_without_a_kvlint_table_is_no_config() {
        let config = Config::parse(
            Path::new("pyproject.toml"),
            "[project]\nname = \"x\"\n",
            true,
        )
        .unwrap();
        assert!(config.is_none());
        let config = Config::parse(
            Path::new("pyproject.toml"),
            "[tool.kvlint]\nmin-tokens-lost = 5\n",
            true,
        )
        .unwrap();
        assert_eq!(config.map(|config| config.options.min_tokens_lost), Some(5));
    }
}
