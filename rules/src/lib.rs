//! # kvlint-rules
//!
//! The linter: the rule catalog and the one pipeline that runs it ([`check_session`] for a
//! recorded session, [`check_pair`] for one request against the one before it), as ruff's
//! linter crate holds both its rules and its driver.
//!
//! Each rule lives in its own file under `rules/`, with its documentation in its doc comment
//! (sections *What it does*, *Why is this bad?*, *Example*, *Use instead*), its detection and
//! its messages, and its fixtures in `fixtures/rules/<name>/`. A rule looks at a
//! [`RuleInput`]: a [`TurnPair`] (two consecutive turns where the later one does not extend
//! the earlier), a break the chat-template check found, a volatile variable of an
//! application prompt template, an audited cache breakpoint, recorded usage, what a whole
//! session shows a hosted API's cache, the thinking blocks a request sends back that fail
//! Anthropic's prefix check ([`thinking`]), or instructions a model appends after the input. [`diagnose`] asks the rules
//! in [`RULES`] order, most specific first; `prefix-edit` takes whatever pair no other rule
//! names. For pairs, severity follows cost, not the rule: a break that makes the engine
//! recompute content the earlier turn had cached is an error; a dropped per-turn tail is
//! info.
//!
//! ```
//! use std::sync::Arc;
//! use kvlint_core::{Renderer, SessionFile};
//!
//! let jsonl = concat!(
//!     r#"{"messages":[{"role":"system","content":"Time: 10:00:01. You are terse."},{"role":"user","content":"hi"}]}"#, "\n",
//!     r#"{"messages":[{"role":"system","content":"Time: 10:00:07. You are terse."},{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"bye"}]}"#,
//! );
//! let session = SessionFile::parse("s.jsonl".into(), Arc::from(jsonl)).unwrap();
//! let checked = kvlint_rules::check_session(&session, &Renderer::provider(), None).unwrap();
//! let finding = &checked.findings[0];
//! assert_eq!(finding.rule, "volatile-timestamp");
//! assert_eq!(finding.part.to_string(), "messages[0].content");
//! // Column 55 is the `7` of `10:00:07`, the first character that differs.
//! let span = finding.span.unwrap();
//! assert_eq!((span.line, span.column), (2, 55));
//! ```

use kvlint_core::cache::{BreakpointIssue, ColdStartIssue, IdleIssue, SessionIssue, UsageIssue};
use kvlint_core::prompt_template::VolatilePlacement;
use kvlint_render::template_check::TemplateBreak;
use kvlint_request::diagnostic::{Diagnostic, Severity, Span};
use kvlint_request::locate::LineColumn;
use kvlint_request::path::PartPath;

mod check;
mod pair;
mod rules;
pub mod thinking;
pub mod volatile;
pub mod words;

pub use check::{
    CheckedTurn, ImpliedProvider, SessionCheck, check_pair, check_sent_session, check_session,
    check_session_on, check_session_under_implied_provider, visit_turns,
};
pub use pair::TurnPair;
pub use rules::*;

/// What a rule is: its name, code, summary and documentation.
#[derive(Debug)]
pub struct RuleMeta {
    /// Kebab-case, names the pattern: `volatile-timestamp`.
    pub name: &'static str,
    /// Stable code: `KV101`.
    pub code: &'static str,
    pub summary: &'static str,
    /// The rule's doc comment, Markdown.
    pub docs: &'static str,
}

/// The project's repository: the workspace's `repository` field, the one owner of the address.
pub const REPOSITORY: &str = env!("CARGO_PKG_REPOSITORY");

/// Where each rule's documentation is published: `docs/rules/NAME.md` of the repository.
pub const DOCUMENTATION_URL: &str = concat!(env!("CARGO_PKG_REPOSITORY"), "/blob/main/docs/rules");

impl RuleMeta {
    /// The address of the rule's documentation page.
    pub fn url(&self) -> String {
        format!("{DOCUMENTATION_URL}/{}.md", self.name)
    }

    /// The rule's documentation as Markdown (doc comments arrive with a leading space).
    pub fn documentation(&self) -> String {
        self.docs
            .lines()
            .map(|line| line.strip_prefix(' ').unwrap_or(line))
            .collect::<Vec<_>>()
            .join("\n")
            + "\n"
    }
}

/// What a rule looks at.
#[derive(Clone, Copy)]
pub enum RuleInput<'a> {
    /// Two consecutive recorded turns where the later one does not extend the earlier.
    TurnPair(&'a TurnPair<'a>),
    /// Two consecutive turns of a session the grouping read as its compaction (its history
    /// summarized, its end kept): the break is the compaction, whatever part it starts in.
    Compaction(&'a TurnPair<'a>),
    /// A break the chat-template check found in a model's template.
    TemplateBreak(&'a TemplateBreak),
    /// A variable of an application prompt template that changes every turn and renders
    /// before stable text; `template` is the template's text.
    Placement {
        placement: &'a VolatilePlacement,
        template: &'a str,
    },
    /// An audited Anthropic cache breakpoint, with its place in the session file.
    Breakpoint {
        issue: &'a BreakpointIssue,
        span: Option<Span>,
    },
    /// A turn whose recorded usage disagrees with the prediction, with the place of its body.
    Reported {
        issue: &'a UsageIssue,
        span: Option<Span>,
    },
    /// What only a whole session shows a hosted API's cache, with the place of its first body.
    Session {
        issue: &'a SessionIssue,
        span: Option<Span>,
    },
    /// Thinking blocks a request sends back that fail Anthropic's prefix check, with the
    /// place of the first failing block.
    Thinking {
        issue: &'a thinking::ThinkingIssue,
        span: Option<Span>,
    },
    /// Turns that came after the cache's lifetime, with the place of the first.
    Idle {
        issue: &'a IdleIssue,
        span: Option<Span>,
    },
    /// A session of a recording that starts cold on a prefix an earlier session sent, with
    /// the place of its first body.
    Cold {
        issue: &'a ColdStartIssue,
        span: Option<Span>,
    },
    /// A request whose model appends its `instructions` after the input, uncached (the first
    /// of its session to do so), with their tokens and place.
    UncachedInstructions {
        turn: usize,
        model: &'a str,
        tokens: usize,
        span: Option<Span>,
    },
}

/// What a rule says of an input it names: the rest of the diagnostic comes from the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub severity: Severity,
    pub message: String,
    pub help: String,
    pub tokens_lost: usize,
}

impl Finding {
    pub fn new(severity: Severity, message: impl Into<String>, help: impl Into<String>) -> Self {
        Self {
            severity,
            message: message.into(),
            help: help.into(),
            tokens_lost: 0,
        }
    }

    /// The break of a recorded pair, priced by what it costs: recomputing content the earlier
    /// turn had cached is an error; dropping a per-turn tail is info.
    /// A change of whitespace alone says so, unless the cause already does.
    pub fn of_pair(pair: &TurnPair<'_>, cause: &str, help: impl Into<String>) -> Self {
        let whitespace_only = pair.change().is_some_and(|change| {
            let blank = |text: &str| text.chars().all(char::is_whitespace);
            change.before != change.after && blank(change.before) && blank(change.after)
        });
        let cause = if whitespace_only && !cause.contains("whitespace") {
            format!("{cause} (whitespace only)")
        } else {
            cause.to_owned()
        };
        let tokens_lost = pair.tokens_lost();
        let (severity, message) = if pair.recomputes_kept_content() {
            (
                Severity::Error,
                format!("{cause}: {tokens_lost} cached tokens recomputed"),
            )
        } else {
            (
                Severity::Info,
                format!(
                    "{cause}: a per-turn tail of {tokens_lost} tokens that the next turn drops"
                ),
            )
        };
        Self {
            severity,
            message,
            help: help.into(),
            tokens_lost,
        }
    }

    pub fn with_tokens_lost(mut self, tokens_lost: usize) -> Self {
        self.tokens_lost = tokens_lost;
        self
    }
}

/// A rule of the catalog.
pub trait Rule: Sync {
    fn meta(&self) -> &'static RuleMeta;

    /// Returns a finding when the input is this rule's pattern.
    fn check(&self, input: &RuleInput<'_>) -> Option<Finding>;
}

/// Declares a rule's unit struct and its metadata from its doc comment.
macro_rules! declare_rule {
    (
        $(#[doc = $doc:literal])+
        $vis:vis struct $rule:ident {
            name: $name:literal,
            code: $code:literal,
            summary: $summary:literal $(,)?
        }
    ) => {
        $(#[doc = $doc])+
        #[derive(Debug, Default, Clone, Copy)]
        $vis struct $rule;

        impl $rule {
            pub const META: $crate::RuleMeta = $crate::RuleMeta {
                name: $name,
                code: $code,
                summary: $summary,
                docs: concat!($($doc, "\n"),+),
            };
        }
    };
}
pub(crate) use declare_rule;

/// Looks a rule up by name (`volatile-timestamp`) or code (`KV101`).
pub fn rule(name_or_code: &str) -> Option<&'static dyn Rule> {
    RULES.iter().copied().find(|rule| {
        let meta = rule.meta();
        meta.name == name_or_code || meta.code.eq_ignore_ascii_case(name_or_code)
    })
}

/// Names an input as a diagnostic: the first rule, in [`RULES`] order, that finds its pattern.
/// Every broken pair is named (`prefix-edit` takes any pair).
pub fn diagnose(input: &RuleInput<'_>) -> Option<Diagnostic> {
    let (meta, finding) = RULES
        .iter()
        .find_map(|rule| Some((rule.meta(), rule.check(input)?)))?;
    Some(diagnostic(meta, finding, input))
}

/// The one place a diagnostic is built: the rule's metadata, its finding, and where the input
/// is.
fn diagnostic(meta: &RuleMeta, finding: Finding, input: &RuleInput<'_>) -> Diagnostic {
    let template = || PartPath::root().key("template");
    let (turn, part, span, previous_window, current_window) = match *input {
        RuleInput::TurnPair(pair) | RuleInput::Compaction(pair) => {
            let divergence = pair.divergence;
            (
                pair.index,
                divergence.part.clone(),
                divergence.span,
                divergence.previous_window.clone(),
                divergence.current_window.clone(),
            )
        }
        RuleInput::TemplateBreak(found) => (
            found.turn,
            template(),
            found.site.as_ref().and_then(|site| site.span),
            found.before.clone(),
            found.after.clone(),
        ),
        RuleInput::Placement {
            placement,
            template: text,
        } => {
            let end = LineColumn::of_offset(text, placement.offset + placement.len);
            let span = Span {
                line: placement.line,
                column: placement.column,
                end_line: end.line,
                end_column: end.column,
                offset: placement.offset,
                len: placement.len,
            };
            (0, template(), Some(span), String::new(), String::new())
        }
        RuleInput::Breakpoint { issue, span } => (
            issue.turn,
            issue.block.clone(),
            span,
            String::new(),
            String::new(),
        ),
        RuleInput::Reported { issue, span } => (
            issue.turn,
            PartPath::root(),
            span,
            String::new(),
            String::new(),
        ),
        RuleInput::Session { span, .. } => {
            (0, PartPath::root(), span, String::new(), String::new())
        }
        RuleInput::Thinking { issue, span } => (
            issue.turn,
            issue.block.clone(),
            span,
            String::new(),
            String::new(),
        ),
        RuleInput::Idle { issue, span } => (
            issue.turn,
            PartPath::root(),
            span,
            String::new(),
            String::new(),
        ),
        RuleInput::Cold { issue, span } => {
            (0, issue.block.clone(), span, String::new(), String::new())
        }
        RuleInput::UncachedInstructions { turn, span, .. } => (
            turn,
            PartPath::root().key("instructions"),
            span,
            String::new(),
            String::new(),
        ),
    };
    Diagnostic {
        rule: meta.name,
        code: meta.code,
        severity: finding.severity,
        turn,
        part,
        message: finding.message,
        tokens_lost: finding.tokens_lost,
        span,
        help: finding.help,
        previous_window,
        current_window,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_documents_every_section() {
        for rule in RULES {
            let meta = rule.meta();
            for section in [
                "## What it does",
                "## Why is this bad?",
                "## Example",
                "## Use instead",
            ] {
                assert!(meta.docs.contains(section), "{} lacks {section}", meta.name);
            }
            assert!(meta.code.starts_with("KV"), "{}", meta.code);
        }
    }

    #[test]
    fn names_and_codes_are_unique() {
        let mut names: Vec<_> = RULES.iter().map(|rule| rule.meta().name).collect();
        let mut codes: Vec<_> = RULES.iter().map(|rule| rule.meta().code).collect();
        names.sort_unstable();
        codes.sort_unstable();
        names.dedup();
        codes.dedup();
        assert_eq!(names.len(), RULES.len());
        assert_eq!(codes.len(), RULES.len());
        assert_eq!(
            rule("kv101").map(|rule| rule.meta().name),
            Some("volatile-timestamp")
        );
    }
}
