//! The rows a run takes from its logs: a time window and conditions on a row's fields.

use kvlint_protocol::key::Carried;

use super::row::{LogRow, parse_time};

/// Which rows are taken: those in `[since, until)` (seconds since the Unix epoch) that meet
/// every condition. With a time bound, a row without a time is left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RowFilter {
    pub since: Option<f64>,
    pub until: Option<f64>,
    pub conditions: Vec<Condition>,
}

/// A field of a row a condition looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowField {
    /// The body's `model` (Langfuse: `provided_model_name` or `model`).
    Model,
    /// The request's URL or its path (`/v1/chat/completions`).
    Endpoint,
    /// The session key the request carries (headers, body, the `session_id` column).
    Session,
    /// A header, by name in any case.
    Header(String),
}

/// `FIELD=VALUE`: the field's value is exactly `value`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    pub field: RowField,
    pub value: String,
}

/// A `--where` or `--since` that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FilterError(String);

impl Condition {
    /// Reads `FIELD=VALUE`: `model`, `endpoint`, `session` or `header:NAME`.
    pub fn parse(text: &str) -> Result<Self, FilterError> {
        let Some((field, value)) = text.split_once('=') else {
            return Err(FilterError(format!(
                "`{text}`: expected FIELD=VALUE (model, endpoint, session or header:NAME)"
            )));
        };
        let field = match field.trim() {
            "model" => RowField::Model,
            "endpoint" => RowField::Endpoint,
            "session" => RowField::Session,
            other => match other.strip_prefix("header:") {
                Some(name) if !name.is_empty() => RowField::Header(name.to_owned()),
                _ => {
                    return Err(FilterError(format!(
                        "`{other}` is no field a row is selected by: model, endpoint, session or header:NAME"
                    )));
                }
            },
        };
        Ok(Self {
            field,
            value: value.to_owned(),
        })
    }

    fn holds(&self, row: &LogRow) -> bool {
        match &self.field {
            RowField::Model => row.model() == Some(self.value.as_str()),
            RowField::Endpoint => {
                row.url == self.value || kvlint_protocol::endpoint::path_of(&row.url) == self.value
            }
            RowField::Session => {
                row.session_id.as_deref() == Some(self.value.as_str())
                    || carried_session_key(row).as_deref() == Some(self.value.as_str())
            }
            RowField::Header(name) => row
                .headers
                .iter()
                .any(|(header, value)| header.eq_ignore_ascii_case(name) && *value == self.value),
        }
    }
}

/// The session key a row's body and headers carry.
fn carried_session_key(row: &LogRow) -> Option<String> {
    let headers: Vec<(&str, &str)> = row
        .headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    Carried {
        body: Some(&row.value),
        headers: &headers,
        trace_conversation: row.session_id.as_deref(),
    }
    .session_key()
}

/// A `--since` or `--until`: RFC 3339, a date and time without an offset (UTC), or a date
/// (its midnight, UTC).
pub fn parse_time_bound(text: &str) -> Result<f64, FilterError> {
    parse_time(text).ok_or_else(|| {
        FilterError(format!(
            "`{text}`: expected a time like 2026-11-29T10:00:00Z, 2026-11-29 10:00:00 (UTC) or a date like 2026-11-29"
        ))
    })
}

impl RowFilter {
    /// Whether the filter takes the row. Conditions on the same field are alternatives
    /// (`--where model=a --where model=b`: either model); conditions on different fields must
    /// all hold.
    pub(super) fn takes(&self, row: &LogRow) -> bool {
        if self.since.is_some() || self.until.is_some() {
            let Some(time) = row.time else {
                return false;
            };
            if self.since.is_some_and(|since| time < since)
                || self.until.is_some_and(|until| time >= until)
            {
                return false;
            }
        }
        self.conditions.iter().all(|condition| {
            self.conditions
                .iter()
                .filter(|other| other.field == condition.field)
                .any(|other| other.holds(row))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_are_read_or_refused_with_the_fields_named() {
        assert_eq!(
            Condition::parse("header:X-Team=search").unwrap(),
            Condition {
                field: RowField::Header("X-Team".into()),
                value: "search".into()
            }
        );
        assert_eq!(Condition::parse("model=a=b").unwrap().value, "a=b");
        let error = Condition::parse("colour=red").unwrap_err();
        assert!(error.to_string().contains("header:NAME"), "{error}");
        assert!(Condition::parse("model").is_err());
        assert!(parse_time_bound("2026-13-01").is_err());
    }
}
