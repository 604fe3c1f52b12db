//! The Jinja environment transformers compiles chat templates in: its syntax settings, and
//! the filters, tests and functions it adds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::NaiveDateTime;
use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Kwargs, Object, ObjectRepr, Rest, Value as JinjaValue, ValueKind};
use minijinja::{AutoEscape, Environment, Error as JinjaError, ErrorKind, State};

use super::PythonJson;
use super::limits;
use super::python_list::{ListMutations, namespace_with_lists};

/// What `strftime_now` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// Every call reads this time.
    At(NaiveDateTime),
    /// Call number `call` (0-based, in the order the template makes them) reads `later`,
    /// every other call `base`: which call puts the changing text in the prompt.
    OneCallAt {
        base: NaiveDateTime,
        later: NaiveDateTime,
        call: usize,
    },
    /// Call number `call` fails, so that the error places that call in the template.
    FailingCall(usize),
}

/// The error a [`Clock::FailingCall`] raises.
#[derive(Debug, thiserror::Error)]
#[error("strftime_now call {0} stopped on purpose to find its place in the template")]
pub(super) struct ClockProbe(pub usize);

/// The error `raise_exception` raises: the template refused the input.
#[derive(Debug, thiserror::Error)]
#[error("raised by the template")]
pub(super) struct RaisedByTemplate;

/// A value that fails wherever the template prints, adds, iterates or serializes it, so that
/// the error places the first use of a variable.
#[derive(Debug)]
pub(super) struct Tripwire;

impl Object for Tripwire {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }
}

fn is_tripwire(value: &JinjaValue) -> bool {
    value.downcast_object_ref::<Tripwire>().is_some()
        || (PROBING.get()
            && value
                .as_str()
                .is_some_and(|text| text.contains(PROBED_TEXT)))
}

/// The text a site probe puts in a message field: printing anything that holds it fails, so
/// that the error places where the template prints the field. Unlike a [`Tripwire`], it is a
/// string, so the template takes the same branches as with the field's own text.
pub(super) const PROBED_TEXT: &str = "\u{1}kvlint-site-probe\u{1}";

thread_local! {
    /// Whether the render running on this thread is a site probe's.
    static PROBING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// While held, printed text that holds [`PROBED_TEXT`] fails the render on this thread.
pub(super) struct Probing;

impl Probing {
    pub(super) fn start() -> Self {
        PROBING.set(true);
        Self
    }
}

impl Drop for Probing {
    fn drop(&mut self) {
        PROBING.set(false);
    }
}

fn tripped() -> JinjaError {
    JinjaError::new(ErrorKind::InvalidOperation, "the variable is used here")
}

/// A Jinja environment configured like transformers' `_compile_jinja_template`.
pub(super) fn transformers_environment(
    clock: Clock,
    mutations: Arc<ListMutations>,
) -> Environment<'static> {
    let mut environment = Environment::new();
    if let Ok(syntax) = SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()
    {
        environment.set_syntax(syntax);
    }
    environment.set_auto_escape_callback(|_| AutoEscape::None);
    environment.set_formatter(|out, state, value| {
        if is_tripwire(value) {
            return Err(tripped());
        }
        let printed = match value.as_str() {
            Some(text) => text.len(),
            None => value.to_string().len(),
        };
        limits::print(printed)?;
        minijinja::escape_formatter(out, state, value)
    });
    environment.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    minijinja_contrib::add_to_environment(&mut environment);
    environment.add_filter("tojson", python_tojson);
    environment.add_filter("indent", python_indent);
    // Python's `iterable`: none and undefined are not.
    environment.add_test("iterable", |value: JinjaValue| {
        !value.is_none() && !value.is_undefined() && value.try_iter().is_ok()
    });
    environment.add_function(
        "raise_exception",
        |message: String| -> Result<JinjaValue, JinjaError> {
            Err(JinjaError::new(ErrorKind::InvalidOperation, message).with_source(RaisedByTemplate))
        },
    );
    environment.add_function("namespace", namespace_with_lists(mutations));
    set_clock(&mut environment, clock);
    environment
}

/// Makes `strftime_now` read `clock`.
pub(super) fn set_clock(environment: &mut Environment<'static>, clock: Clock) {
    let calls = AtomicUsize::new(0);
    environment.add_function(
        "strftime_now",
        move |format: String| -> Result<String, JinjaError> {
            let call = calls.fetch_add(1, Ordering::Relaxed);
            let time = match clock {
                Clock::At(now) => now,
                Clock::OneCallAt {
                    base,
                    later,
                    call: changed,
                } => {
                    if call == changed {
                        later
                    } else {
                        base
                    }
                }
                Clock::FailingCall(failing) if failing == call => {
                    return Err(JinjaError::new(
                        ErrorKind::InvalidOperation,
                        format!("strftime_now({format:?})"),
                    )
                    .with_source(ClockProbe(call)));
                }
                Clock::FailingCall(_) => NaiveDateTime::default(),
            };
            Ok(time.format(&format).to_string())
        },
    );
}

/// `json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)`.
fn python_tojson(
    state: &State,
    value: JinjaValue,
    kwargs: Kwargs,
) -> Result<JinjaValue, JinjaError> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let separators: Option<Vec<String>> = kwargs.get("separators")?;
    let _ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    kwargs.assert_all_used()?;
    if contains(&value, &is_tripwire, 0) {
        return Err(tripped());
    }
    if contains(&value, &JinjaValue::is_undefined, 0) {
        return Err(JinjaError::new(
            ErrorKind::BadSerialization,
            "Object of type Undefined is not JSON serializable",
        ));
    }
    let json = serde_json::to_value(&value)
        .map_err(|error| JinjaError::new(ErrorKind::BadSerialization, error.to_string()))?;
    let (item_separator, key_separator) = match separators.as_deref() {
        Some([item, key]) => (item.clone(), key.clone()),
        _ if indent.is_some() => (",".to_owned(), ": ".to_owned()),
        _ => (", ".to_owned(), ": ".to_owned()),
    };
    let style = PythonJson {
        indent,
        sort_keys: sort_keys.unwrap_or(false),
        item_separator,
        key_separator,
        ensure_ascii: false,
    };
    limits::pay_for(state, style.dumps_len(&json))?;
    Ok(JinjaValue::from_safe_string(style.dumps(&json)))
}

/// Whether a value is or holds a value that passes the test (an undefined value, which
/// Python's `json.dumps` refuses and serde would write as `null`).
fn contains(value: &JinjaValue, test: &dyn Fn(&JinjaValue) -> bool, depth: usize) -> bool {
    if test(value) {
        return true;
    }
    if depth > 32 || !matches!(value.kind(), ValueKind::Seq | ValueKind::Map) {
        return false;
    }
    let Ok(items) = value.try_iter() else {
        return false;
    };
    let is_map = value.kind() == ValueKind::Map;
    items.into_iter().any(|item| {
        let item = if is_map {
            value.get_item(&item).unwrap_or_default()
        } else {
            item
        };
        contains(&item, test, depth + 1)
    })
}

/// Jinja2's `indent` filter, which keeps a trailing line break (minijinja's drops it):
/// `'{\n' | indent(4, first=true)` is `'    {\n'`.
fn python_indent(
    state: &State,
    value: String,
    width: Option<JinjaValue>,
    // `first` and `blank`, when given by position.
    flags: Rest<bool>,
    kwargs: Kwargs,
) -> Result<String, JinjaError> {
    let (first, blank) = match flags.as_slice() {
        [] => (None, None),
        [first] => (Some(*first), None),
        [first, blank] => (Some(*first), Some(*blank)),
        _ => {
            return Err(JinjaError::new(
                ErrorKind::TooManyArguments,
                "indent takes width, first and blank",
            ));
        }
    };
    let width = match kwargs.get::<Option<JinjaValue>>("width")? {
        Some(width) => Some(width),
        None => width,
    };
    let first = kwargs
        .get::<Option<bool>>("first")?
        .or(first)
        .unwrap_or(false);
    let blank = kwargs
        .get::<Option<bool>>("blank")?
        .or(blank)
        .unwrap_or(false);
    kwargs.assert_all_used()?;
    // `s += newline`, "necessary for splitlines".
    let text = format!("{value}\n");
    let lines = python_splitlines(&text);
    // A text width, or a number of spaces, paid for before it is made: a width of a billion
    // would abort the process.
    let (text_width, spaces) = match width {
        Some(width) if width.kind() == ValueKind::String => (Some(width.to_string()), 0),
        Some(width) => (None, usize::try_from(width)?),
        None => (None, 4),
    };
    let width_bytes = text_width.as_ref().map_or(spaces, String::len);
    limits::pay_for(
        state,
        width_bytes
            .saturating_mul(lines.len() + 1)
            .saturating_add(text.len()),
    )?;
    let indention = text_width.unwrap_or_else(|| " ".repeat(spaces));
    let mut indented = if blank {
        lines.join(&format!("\n{indention}"))
    } else {
        let mut lines = lines.into_iter();
        let mut indented = lines.next().unwrap_or_default().to_owned();
        let rest: Vec<String> = lines
            .map(|line| {
                if line.is_empty() {
                    String::new()
                } else {
                    format!("{indention}{line}")
                }
            })
            .collect();
        if !rest.is_empty() {
            indented.push('\n');
            indented.push_str(&rest.join("\n"));
        }
        indented
    };
    if first {
        indented.insert_str(0, &indention);
    }
    Ok(indented)
}

/// Python's `str.splitlines()`: lines split at every Unicode line boundary, without them.
fn python_splitlines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut characters = text.char_indices().peekable();
    while let Some((at, character)) = characters.next() {
        let is_break = matches!(
            character,
            '\n' | '\r'
                | '\u{0b}'
                | '\u{0c}'
                | '\u{1c}'
                | '\u{1d}'
                | '\u{1e}'
                | '\u{85}'
                | '\u{2028}'
                | '\u{2029}'
        );
        if !is_break {
            continue;
        }
        lines.push(&text[start..at]);
        let mut end = at + character.len_utf8();
        if character == '\r'
            && let Some((next_at, '\n')) = characters.peek().copied()
        {
            characters.next();
            end = next_at + 1;
        }
        start = end;
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}
