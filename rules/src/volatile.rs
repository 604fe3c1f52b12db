//! Volatile values: times, ids and counters that change from turn to turn.
//!
//! A break is a volatile value of some class when the diverging part differs only in values
//! of that class, or when the earlier turn's dropped tail comes back in this turn with other
//! values of that class (a per-turn note or reminder).

use std::borrow::Cow;
use std::sync::LazyLock;

use kvlint_core::prompt_template::VolatilePlacement;
use kvlint_request::diagnostic::Severity;
use regex::Regex;

use crate::{Finding, TurnPair};

/// A kind of value that changes from turn to turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VolatileClass {
    Timestamp,
    Id,
    Counter,
}

const MONTH: &str = "(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\\.?";
const WEEKDAY: &str = "(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*";

static TIMESTAMP: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let patterns = [
        // 2025-03-04, 2025-03-04T10:22:31.123Z, 2025-03-04 10:22:31+01:00
        r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
            .to_owned(),
        // 10:22, 10:22:31, 10:22:31.5 PM
        r"\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:\s?[AaPp]\.?[Mm]\.?)?".to_owned(),
        // 3/4/2025
        r"\b\d{1,2}/\d{1,2}/\d{2,4}\b".to_owned(),
        // Tue, Mar 4 / March 4th, 2025 / 4 March 2025
        format!(r"\b{WEEKDAY}\b"),
        format!(r"\b{MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?"),
        format!(r"\b\d{{1,2}}\s+{MONTH}\s+\d{{4}}\b"),
        // Unix epochs in seconds or milliseconds (2017–2033)
        r"\b1[5-9]\d{8}(?:\d{3})?(?:\.\d+)?\b".to_owned(),
    ];
    Regex::new(&patterns.join("|")).ok()
});

static ID: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
        r"|\b(?:req|run|sess|session|call|msg|chatcmpl|toolu|resp|trace|span|sbx|conv|thread|asst|evt|id|nonce|sandbox)[_-][A-Za-z0-9_-]{6,}",
        r"|\b[0-9a-fA-F]{8,}\b",
        r"|[A-Za-z0-9+/_-]{16,}={0,2}",
    ))
    .ok()
});

static NUMBER: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"\d+(?:[.,]\d+)*").ok());

/// A number that a word labels as a count that moves: `budget left: 180863`, `12 steps
/// remaining`, `attempt 3`.
static LABELLED_COUNTER: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)\b(?:budget|left|remaining|used|elapsed|attempts?|iterations?|retries|credits|quota)",
        r"\b[^\d\n]{0,24}?(\d+(?:[.,]\d+)*)",
        r"|(\d+(?:[.,]\d+)*)\s*(?:tokens?|credits|steps|turns|attempts|calls|requests)\s+",
        r"(?:left|remaining|used)\b",
    ))
    .ok()
});

/// The first counter a text labels as one (`Token budget left: 180863`, `12 steps
/// remaining`). Numbers are ordinary in instructions and profiles: only a number a word says
/// is counting is taken for one.
pub fn labelled_counter_in(text: &str) -> Option<&str> {
    let found = LABELLED_COUNTER.as_ref()?.captures(text)?;
    found
        .get(1)
        .or_else(|| found.get(2))
        .map(|number| number.as_str())
}

impl VolatileClass {
    fn pattern(self) -> Option<&'static Regex> {
        match self {
            Self::Timestamp => TIMESTAMP.as_ref(),
            Self::Id => ID.as_ref(),
            Self::Counter => NUMBER.as_ref(),
        }
    }

    /// Whether a match is a value of this class and not a word that happens to fit the pattern.
    fn accepts(self, value: &str) -> bool {
        match self {
            Self::Id => {
                let has_digit = value.bytes().any(|byte| byte.is_ascii_digit());
                let has_letter = value.bytes().any(|byte| byte.is_ascii_alphabetic());
                let has_upper = value.bytes().any(|byte| byte.is_ascii_uppercase());
                let has_lower = value.bytes().any(|byte| byte.is_ascii_lowercase());
                let has_separator = value.contains(['_', '-']);
                // Hex ids and prefixed ids mix digits and letters; base64 ids mix cases too.
                has_digit
                    && has_letter
                    && (has_separator
                        || value.len() < 16
                        || (has_upper && has_lower)
                        || value.bytes().all(|byte| byte.is_ascii_hexdigit()))
            }
            Self::Timestamp | Self::Counter => true,
        }
    }

    /// Whether the text holds a value of this class.
    pub fn occurs_in(self, text: &str) -> bool {
        self.first_in(text).is_some()
    }

    /// The first value of this class in the text.
    pub fn first_in(self, text: &str) -> Option<&str> {
        self.pattern()?
            .find_iter(text)
            .map(|found| found.as_str())
            .find(|value| self.accepts(value))
    }

    /// The rule that reports a break by a value of this class.
    pub fn rule(self) -> &'static crate::RuleMeta {
        match self {
            Self::Timestamp => &crate::rules::VolatileTimestamp::META,
            Self::Id => &crate::rules::VolatileId::META,
            Self::Counter => &crate::rules::VolatileCounter::META,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timestamp => "timestamp",
            Self::Id => "id",
            Self::Counter => "counter",
        }
    }

    /// The text with every value of this class replaced by a placeholder.
    pub fn normalize(self, text: &str) -> Cow<'_, str> {
        let Some(pattern) = self.pattern() else {
            return Cow::Borrowed(text);
        };
        pattern.replace_all(text, |captures: &regex::Captures<'_>| {
            let value = captures.get(0).map_or("", |found| found.as_str());
            if self.accepts(value) {
                "\u{1}".to_owned()
            } else {
                value.to_owned()
            }
        })
    }

    fn differs_only_in_values(self, before: &str, after: &str) -> bool {
        self.normalize(before) == self.normalize(after)
    }

    /// Whether this class of value explains the pair's break.
    pub fn explains(self, pair: &TurnPair<'_>) -> bool {
        if let Some(change) = pair.change()
            && self.occurs_in(change.previous_text)
            && self.differs_only_in_values(change.previous_text, change.current_text)
        {
            // Inside a message, the rest of the message must be the same too: a message
            // dropped from history can leave two different messages whose first
            // difference is an id.
            let message = |request: &kvlint_request::request::Request| {
                pair.current_part()
                    .and_then(|part| part.message)
                    .and_then(|index| request.message_value(index))
                    .map(ToString::to_string)
            };
            match (message(pair.previous), message(pair.current)) {
                (Some(before), Some(after)) if !self.differs_only_in_values(&before, &after) => {}
                _ => return true,
            }
        }
        if pair.recomputes_kept_content() {
            return false;
        }
        // A volatile tail: what the earlier turn dropped comes back with new values.
        let current = self.normalize(pair.current_tail_text());
        pair.previous_tail().into_iter().any(|tail| {
            let tail = tail.trim();
            self.occurs_in(tail) && current.contains(self.normalize(tail).as_ref())
        })
    }
}

/// A volatile variable of an application prompt template, placed before stable text.
pub(crate) fn placement_finding(placement: &VolatilePlacement) -> Finding {
    Finding::new(
        Severity::Error,
        format!(
            "`{}` changes every turn and renders before {} tokens of stable text, which no turn can reuse",
            placement.variable, placement.stable_tokens_after
        ),
        format!(
            "move `{}` after the stable text: to the end of the template, or into the newest message",
            placement.variable
        ),
    )
    .with_tokens_lost(placement.stable_tokens_after)
}

#[cfg(test)]
mod tests {
    use super::VolatileClass::{Counter, Id, Timestamp};
    use super::labelled_counter_in;

    #[test]
    fn a_counter_is_a_number_a_word_says_is_counting() {
        for (text, counter) in [
            ("Token budget left: 180863", Some("180863")),
            ("You have 12 steps remaining.", Some("12")),
            ("Attempt 3 of 5.", Some("3")),
            ("Credits used: 1,204", Some("1,204")),
            ("Step 3: run the tests.", None),
            ("Answer in at most 3 sentences; use Python 3.12.", None),
            ("Never retry more than twice.", None),
        ] {
            assert_eq!(labelled_counter_in(text), counter, "{text}");
        }
    }

    #[test]
    fn timestamps_of_common_shapes_normalize_away() {
        for (before, after) in [
            ("Now: 2025-03-04T10:22:31Z.", "Now: 2025-03-04T10:23:02Z."),
            (
                "Current time: Tue Mar 4 10:22:31 2025",
                "Current time: Wed Mar 5 09:01:07 2025",
            ),
            ("Today is March 4th, 2025", "Today is March 5th, 2025"),
            ("epoch=1741083751", "epoch=1741083815"),
            ("date 3/4/2025", "date 3/5/2025"),
        ] {
            assert_eq!(
                Timestamp.normalize(before),
                Timestamp.normalize(after),
                "{before}"
            );
        }
        assert_ne!(
            Timestamp.normalize("You have 7 steps"),
            Timestamp.normalize("You have 6 steps")
        );
    }

    #[test]
    fn ids_need_the_look_of_an_id() {
        assert!(Id.occurs_in("session 3f2b9c1e-8d7a-4b6c-9e5f-1a2b3c4d5e6f"));
        assert!(Id.occurs_in("request req_8fK2mQ9xLp"));
        assert!(Id.occurs_in("nonce 9f86d081884c7d65"));
        assert!(!Id.occurs_in("see configuration_management for details"));
        assert!(!Id.occurs_in("12345678"));
    }

    #[test]
    fn counters_are_numbers() {
        assert_eq!(
            Counter.normalize("7 steps left, 1,532 tokens"),
            "\u{1} steps left, \u{1} tokens"
        );
    }

    /// A pattern that does not compile is `None` at run time, and the rules reading it would
    /// find nothing: it fails here instead.
    #[test]
    fn every_static_pattern_compiles() {
        assert!(super::TIMESTAMP.is_some(), "TIMESTAMP does not compile");
        assert!(super::ID.is_some(), "ID does not compile");
        assert!(super::NUMBER.is_some(), "NUMBER does not compile");
        assert!(
            super::LABELLED_COUNTER.is_some(),
            "LABELLED_COUNTER does not compile"
        );
    }
}
