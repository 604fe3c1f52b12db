//! The Jinja environment transformers compiles chat templates in: its syntax settings, and
//! the filters, tests and functions it adds.

use std::sync::Arc;

use chrono::NaiveDateTime;
use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Kwargs, Value as JinjaValue};
use minijinja::{AutoEscape, Environment, Error as JinjaError, ErrorKind};

use super::PythonJson;

/// A Jinja environment configured like transformers' `_compile_jinja_template`.
pub(super) fn transformers_environment(now: NaiveDateTime) -> Environment<'static> {
    let mut environment = Environment::new();
    if let Ok(syntax) = SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()
    {
        environment.set_syntax(syntax);
    }
    environment.set_auto_escape_callback(|_| AutoEscape::None);
    environment.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    minijinja_contrib::add_to_environment(&mut environment);
    environment.add_filter("tojson", python_tojson);
    // Python's `iterable`: none and undefined are not.
    environment.add_test("iterable", |value: JinjaValue| {
        !value.is_none() && !value.is_undefined() && value.try_iter().is_ok()
    });
    environment.add_function(
        "raise_exception",
        |message: String| -> Result<JinjaValue, JinjaError> {
            Err(JinjaError::new(ErrorKind::InvalidOperation, message))
        },
    );
    let clock = Arc::new(now);
    environment.add_function("strftime_now", move |format: String| -> String {
        clock.format(&format).to_string()
    });
    environment
}

/// `json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)`.
fn python_tojson(value: JinjaValue, kwargs: Kwargs) -> Result<JinjaValue, JinjaError> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let separators: Option<Vec<String>> = kwargs.get("separators")?;
    let _ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    kwargs.assert_all_used()?;
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
    };
    Ok(JinjaValue::from_safe_string(style.dumps(&json)))
}
