//! Application prompt templates: where volatile variables sit relative to stable text.
//!
//! A prompt template renders once per turn. A variable that changes every turn (the time, a
//! request id, a step counter) placed before stable text makes that text uncacheable on
//! every turn; one that differs per session (a session, user or conversation id) makes the
//! text after it uncacheable across sessions and users: each new session prefills it again. Supported syntaxes: Jinja (`{{ name }}`, `.j2`, `.jinja`, `.jinja2`),
//! Mustache and Handlebars (`{{name}}`, `.mustache`, `.hbs`), Python format strings
//! (`{name}` in `.txt`, `.prompt`, `.md`), and Dotprompt/Prompty files (front matter, then a
//! Handlebars or Jinja body).

mod syntax;

use std::sync::LazyLock;

use regex::Regex;

pub use syntax::check_template_syntax;

use kvlint_render::tokenize::Tokenizer;
use kvlint_request::locate::LineColumn;

/// The syntax a template is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemplateSyntax {
    /// `{{ name }}`: Jinja, Mustache, Handlebars, Dotprompt, Prompty.
    Braces,
    /// `{name}`: Python format strings.
    Format,
}

impl TemplateSyntax {
    /// The syntax for a file name, or `None` for files that are not prompt templates.
    pub fn for_file(name: &str) -> Option<Self> {
        let extension = name.rsplit('.').next().unwrap_or_default();
        match extension {
            "j2" | "jinja" | "jinja2" | "mustache" | "hbs" | "handlebars" | "prompty"
            | "dotprompt" => Some(Self::Braces),
            "txt" | "prompt" | "md" => Some(Self::Format),
            _ => None,
        }
    }
}

/// What kind of value changes from turn to turn, or from session to session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Volatility {
    Timestamp,
    Id,
    Counter,
    /// Named volatile in the configuration.
    Configured,
    /// The same for every turn of a session, different for every session or user (a
    /// session, user or conversation id): only a new session pays for the text after it.
    PerSession,
}

/// A volatile or per-session variable placed before stable text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolatilePlacement {
    pub variable: String,
    pub volatility: Volatility,
    /// Byte range of the placeholder in the file.
    pub offset: usize,
    pub len: usize,
    pub line: usize,
    pub column: usize,
    /// Tokens of stable text after the placeholder, which no turn can reuse.
    pub stable_tokens_after: usize,
}

static BRACES: LazyLock<Option<Regex>> = LazyLock::new(|| {
    // `{{ name }}`, `{{{ name }}}`, `{{ name | filter }}`, `{{ now() }}`; not block tags.
    Regex::new(r"\{\{\{?-?\s*([A-Za-z_][\w.]*(?:\(\s*\))?)[^}]*\}\}\}?").ok()
});
static FORMAT: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"\{+([A-Za-z_][\w.]*)(?:![rsa])?(?::[^{}]*)?\}+").ok());
static FRONT_MATTER: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?s)\A---\r?\n.*?\r?\n---\r?\n").ok());
static SAMPLE_LINE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r#"(?m)^\s+([A-Za-z_]\w*)\s*:\s*["']?([^"'\n]+?)["']?\s*$"#).ok());
/// `{# kvlint: ignore[rule] #}` (Jinja), `{{! kvlint: ignore[rule] }}` or
/// `{{!-- kvlint: ignore[rule] --}}` (Mustache, Handlebars).
static IGNORE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?:\{#-?|\{\{!(?:--)?)\s*kvlint:\s*ignore\[([^\]]*)\]\s*(?:-?#\}|(?:--)?\}\})")
        .ok()
});

/// Names that mean a value changes every turn, judged by the words of the last name
/// segment: `now`, `current_time`, `time_now`, `request_id`, `steps_left`, `tokens_used`;
/// or every session: `session_id`, `user_id`, `conversation_id`, `customer_name`.
fn volatility_of_name(name: &str) -> Option<Volatility> {
    let name = name.to_ascii_lowercase();
    let last = name
        .rsplit('.')
        .next()
        .unwrap_or(&name)
        .trim_end_matches("()");
    let words: Vec<&str> = last
        .split(['_', '-'])
        .filter(|word| !word.is_empty())
        .collect();
    let has = |candidates: &[&str]| words.iter().any(|word| candidates.contains(word));
    const TIME: &[&str] = &[
        "now",
        "time",
        "datetime",
        "timestamp",
        "today",
        "date",
        "utcnow",
        "clock",
        "elapsed",
        "strftime",
    ];
    const ID: &[&str] = &["uuid", "uuid4", "nonce", "random", "seed"];
    const ID_OWNERS: &[&str] = &[
        "request",
        "trace",
        "span",
        "run",
        "message",
        "call",
        "event",
        "correlation",
    ];
    const COUNTER: &[&str] = &[
        "step",
        "steps",
        "remaining",
        "left",
        "budget",
        "iteration",
        "iterations",
        "attempt",
        "attempts",
        "retry",
        "retries",
        "counter",
        "used",
    ];
    // Who a per-session value belongs to, and what of theirs it is.
    const SESSION_OWNERS: &[&str] = &["session", "sess", "conversation", "conv", "thread", "chat"];
    const PERSON_OWNERS: &[&str] = &[
        "user",
        "customer",
        "account",
        "client",
        "tenant",
        "org",
        "organization",
        "workspace",
    ];
    let owned_by = |owners: &[&str], things: &[&str]| {
        words.len() >= 2
            && words.last().is_some_and(|last| things.contains(last))
            && words
                .iter()
                .rev()
                .nth(1)
                .is_some_and(|owner| owners.contains(owner))
    };
    let per_session = owned_by(SESSION_OWNERS, &["id", "uuid", "guid"])
        || owned_by(PERSON_OWNERS, &["id", "uuid", "guid", "name", "email"]);
    let is_id = has(ID)
        || (words.last() == Some(&"id")
            && words
                .iter()
                .rev()
                .nth(1)
                .is_some_and(|owner| ID_OWNERS.contains(owner)));
    if has(TIME) && !has(&["zone", "timezone", "format"]) {
        Some(Volatility::Timestamp)
    } else if per_session {
        Some(Volatility::PerSession)
    } else if is_id {
        Some(Volatility::Id)
    } else if has(COUNTER) || last == "turn" || last == "turns_left" {
        Some(Volatility::Counter)
    } else {
        None
    }
}

static TIMESTAMP_SAMPLE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"^(\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}.*)?|\d{1,2}:\d{2}(:\d{2})?|1[5-9]\d{8}(\d{3})?)$",
    )
    .ok()
});
static ID_SAMPLE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|[a-z]+_[A-Za-z0-9]{8,}|[0-9a-f]*[0-9][0-9a-f]*[a-f][0-9a-f]*)$").ok()
});

/// Ids whose prefix says they name a session, a conversation or a user: `sess_8fK2mQ9x`,
/// `conv-20250304-0017`, `user_4412`.
static SESSION_SAMPLE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"^(sess|session|conv|conversation|thread|chat|user|usr|cus|cust|customer|acct|account|org|tenant)[_-][A-Za-z0-9_-]{3,}$").ok()
});

/// Volatility from a sample value in the front matter.
fn volatility_of_sample(value: &str) -> Option<Volatility> {
    let matches = |pattern: &LazyLock<Option<Regex>>| {
        pattern
            .as_ref()
            .is_some_and(|pattern| pattern.is_match(value.trim()))
    };
    if matches(&TIMESTAMP_SAMPLE) {
        Some(Volatility::Timestamp)
    } else if matches(&SESSION_SAMPLE) {
        Some(Volatility::PerSession)
    } else if matches(&ID_SAMPLE) && value.trim().len() >= 8 {
        Some(Volatility::Id)
    } else {
        None
    }
}

/// The rules a template silences with `{# kvlint: ignore[rule, ...] #}` (or the Mustache
/// comment `{{! kvlint: ignore[rule, ...] }}`).
pub fn ignored_rules(text: &str) -> Vec<String> {
    IGNORE
        .as_ref()
        .map(|pattern| {
            pattern
                .captures_iter(text)
                .filter_map(|captures| captures.get(1))
                .flat_map(|rules| rules.as_str().split(',').map(|rule| rule.trim().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// Where a template's body starts: after its front matter (Dotprompt, Prompty), if any.
pub fn body_start(text: &str) -> usize {
    FRONT_MATTER
        .as_ref()
        .and_then(|pattern| pattern.find(text))
        .map_or(0, |found| found.end())
}

/// Finds volatile variables that precede stable text.
pub fn check_prompt_template(
    text: &str,
    syntax: TemplateSyntax,
    configured_volatile: &[String],
    tokenizer: &Tokenizer,
) -> Vec<VolatilePlacement> {
    let body_start = body_start(text);
    let samples: Vec<(String, String)> = SAMPLE_LINE
        .as_ref()
        .map(|pattern| {
            pattern
                .captures_iter(&text[..body_start])
                .filter_map(|captures| {
                    Some((
                        captures.get(1)?.as_str().to_owned(),
                        captures.get(2)?.as_str().to_owned(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    let pattern = match syntax {
        TemplateSyntax::Braces => BRACES.as_ref(),
        TemplateSyntax::Format => FORMAT.as_ref(),
    };
    let Some(pattern) = pattern else {
        return Vec::new();
    };
    let placeholders: Vec<(usize, usize, String)> = pattern
        .captures_iter(&text[body_start..])
        .filter_map(|captures| {
            let whole = captures.get(0)?;
            // `{{name}}` in a format string is an escaped literal, not a placeholder.
            if syntax == TemplateSyntax::Format && whole.as_str().starts_with("{{") {
                return None;
            }
            Some((
                body_start + whole.start(),
                whole.len(),
                captures.get(1)?.as_str().to_owned(),
            ))
        })
        .collect();
    let mut found = Vec::new();
    for (index, (offset, len, name)) in placeholders.iter().enumerate() {
        let bare = name.trim_end_matches("()");
        let volatility = if configured_volatile
            .iter()
            .any(|configured| configured == bare)
        {
            Some(Volatility::Configured)
        } else {
            volatility_of_name(bare).or_else(|| {
                samples
                    .iter()
                    .find(|(sample, _)| sample == bare)
                    .and_then(|(_, value)| volatility_of_sample(value))
            })
        };
        let Some(volatility) = volatility else {
            continue;
        };
        // The stable text after this placeholder: everything but other placeholders.
        let mut stable = String::new();
        let mut cursor = offset + len;
        for (next_offset, next_len, _) in &placeholders[index + 1..] {
            stable.push_str(&text[cursor..*next_offset]);
            cursor = next_offset + next_len;
        }
        stable.push_str(&text[cursor..]);
        // Punctuation closing the line is not stable content worth a finding.
        let has_words = stable
            .split(|c: char| !c.is_alphanumeric())
            .any(|word| word.chars().count() >= 2);
        let stable_tokens_after = if has_words {
            tokenizer.encode_piece(&stable).ids.len()
        } else {
            0
        };
        if stable_tokens_after == 0 {
            continue;
        }
        let position = LineColumn::of_offset(text, *offset);
        found.push(VolatilePlacement {
            variable: bare.to_owned(),
            volatility,
            offset: *offset,
            len: *len,
            line: position.line,
            column: position.column,
            stable_tokens_after,
        });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, syntax: TemplateSyntax) -> Vec<(String, Volatility, usize)> {
        check_prompt_template(
            text,
            syntax,
            &["memory_digest".to_owned()],
            &Tokenizer::o200k_base(),
        )
        .into_iter()
        .map(|found| (found.variable, found.volatility, found.line))
        .collect()
    }

    #[test]
    fn a_clock_before_stable_text_is_found_and_at_the_end_it_is_not() {
        let top = "Time: {{ now }}\nYou are a careful assistant. Follow the rules.\n{{ question }}";
        assert_eq!(
            check(top, TemplateSyntax::Braces),
            [("now".to_owned(), Volatility::Timestamp, 1)]
        );
        let bottom =
            "You are a careful assistant. Follow the rules.\n{{ question }}\nTime: {{ now }}.\n";
        assert!(check(bottom, TemplateSyntax::Braces).is_empty());
    }

    #[test]
    fn format_strings_ids_counters_and_configured_names() {
        let text = "Request {request_id}.\n{{literal}} You have {steps_left} steps.\n{memory_digest}\nRules follow.";
        assert_eq!(
            check(text, TemplateSyntax::Format),
            [
                ("request_id".to_owned(), Volatility::Id, 1),
                ("steps_left".to_owned(), Volatility::Counter, 2),
                ("memory_digest".to_owned(), Volatility::Configured, 3),
            ]
        );
    }

    #[test]
    fn sample_values_in_front_matter_class_a_variable() {
        let text = "---\nname: triage\nsample:\n  stamp: 2025-03-04T10:22:31Z\n  topic: billing\n---\nAt {{stamp}} about {{topic}}: answer in the house style.";
        assert_eq!(
            check(text, TemplateSyntax::Braces),
            [("stamp".to_owned(), Volatility::Timestamp, 7)]
        );
    }

    #[test]
    fn names_are_judged_by_their_words() {
        for (name, volatility) in [
            ("now", Some(Volatility::Timestamp)),
            ("datetime.now()", Some(Volatility::Timestamp)),
            ("time_now", Some(Volatility::Timestamp)),
            ("current_date", Some(Volatility::Timestamp)),
            ("user_timezone", None),
            ("request_id", Some(Volatility::Id)),
            ("trace_id", Some(Volatility::Id)),
            ("user_id", Some(Volatility::PerSession)),
            ("session_id", Some(Volatility::PerSession)),
            ("conversation_id", Some(Volatility::PerSession)),
            ("customer_name", Some(Volatility::PerSession)),
            ("session_uuid", Some(Volatility::PerSession)),
            ("file_name", None),
            ("id", None),
            ("steps_left", Some(Volatility::Counter)),
            ("tokens_used", Some(Volatility::Counter)),
            ("remaining_budget", Some(Volatility::Counter)),
            ("question", None),
            ("policies", None),
        ] {
            assert_eq!(volatility_of_name(name), volatility, "{name}");
        }
    }

    #[test]
    fn per_session_values_by_name_or_sample() {
        let text = "---\nsample:\n  conversation: conv_9f8e7d6c\n  topic: billing\n---\nSession {{ session_id }} for {{ conversation }}.\nYou are the support assistant. Answer in the house style.\n{{ topic }}";
        assert_eq!(
            check(text, TemplateSyntax::Braces),
            [
                ("session_id".to_owned(), Volatility::PerSession, 6),
                ("conversation".to_owned(), Volatility::PerSession, 6),
            ]
        );
    }

    #[test]
    fn ignore_comments_name_rules() {
        assert_eq!(
            ignored_rules("{# kvlint: ignore[volatile-timestamp, volatile-id] #}"),
            ["volatile-timestamp", "volatile-id"]
        );
        assert_eq!(
            ignored_rules(
                "{{! kvlint: ignore[volatile-id] }} {{!-- kvlint: ignore[volatile-counter] --}}"
            ),
            ["volatile-id", "volatile-counter"]
        );
        assert!(ignored_rules("{{ kvlint: ignore[volatile-id] }}").is_empty());
    }

    /// A pattern that does not compile is `None` at run time, and the variables, suppression
    /// comments or samples it reads would go unseen: it fails here instead.
    #[test]
    fn every_static_pattern_compiles() {
        assert!(BRACES.is_some(), "BRACES does not compile");
        assert!(FORMAT.is_some(), "FORMAT does not compile");
        assert!(FRONT_MATTER.is_some(), "FRONT_MATTER does not compile");
        assert!(SAMPLE_LINE.is_some(), "SAMPLE_LINE does not compile");
        assert!(IGNORE.is_some(), "IGNORE does not compile");
        assert!(
            TIMESTAMP_SAMPLE.is_some(),
            "TIMESTAMP_SAMPLE does not compile"
        );
        assert!(ID_SAMPLE.is_some(), "ID_SAMPLE does not compile");
        assert!(SESSION_SAMPLE.is_some(), "SESSION_SAMPLE does not compile");
    }
}
