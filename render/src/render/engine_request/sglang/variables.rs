//! The template variables SGLang derives from a chat request: its reasoning effort and
//! `chat_template_kwargs` (`normalize_reasoning_inputs`, `_apply_jinja_template`).

use serde_json::{Map, Value};

use super::request::invalid;

/// The efforts `reasoning_effort` takes as a string (`ReasoningEffortTier`).
const REASONING_EFFORTS: [&str; 8] = [
    "none", "minimal", "low", "medium", "high", "xhigh", "ultra", "max",
];

/// The variables the template gets: `reasoning_effort`, then the request's
/// `chat_template_kwargs`, with `thinking` and `enable_thinking` defaulted from the effort or
/// `reasoning.enabled` (`normalize_reasoning_inputs`).
pub(super) fn template_variables(body: &Map<String, Value>) -> Result<Map<String, Value>, String> {
    let mut kwargs = match body.get("chat_template_kwargs") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(kwargs)) => kwargs.clone(),
        Some(_) => {
            return Err(invalid(
                "Input should be a valid dictionary",
                "chat_template_kwargs",
            ));
        }
    };
    let mut effort = body
        .get("reasoning_effort")
        .filter(|effort| !effort.is_null())
        .cloned();
    let mut thinking = None;
    if let Some(Value::Object(reasoning)) = body.get("reasoning") {
        let requested = reasoning
            .get("effort")
            .filter(|effort| !effort.is_null())
            .or_else(|| reasoning.get("reasoning_effort"))
            .filter(|effort| !effort.is_null());
        if let Some(requested) = requested {
            effort = Some(match requested {
                Value::String(tier) if REASONING_EFFORTS.contains(&tier.as_str()) => {
                    requested.clone()
                }
                Value::Number(_) => requested.clone(),
                _ => return Err(format!("invalid reasoning effort: {requested}")),
            });
        }
        let enabled = reasoning
            .get("enabled")
            .filter(|enabled| !enabled.is_null())
            .or_else(|| reasoning.get("enable"));
        let enabled = match enabled {
            Some(Value::Bool(flag)) => *flag,
            Some(Value::String(text)) => {
                ["1", "true", "yes", "y", "on"].contains(&text.trim().to_lowercase().as_str())
            }
            Some(Value::Number(number)) => number.as_f64().is_some_and(|number| number != 0.0),
            _ => false,
        };
        if enabled {
            thinking = Some(true);
        }
    }
    match &effort {
        None => {}
        Some(Value::Bool(_)) => {
            return Err(invalid(
                "reasoning_effort must not be a boolean",
                "reasoning_effort",
            ));
        }
        Some(Value::String(tier)) if REASONING_EFFORTS.contains(&tier.as_str()) => {}
        Some(Value::Number(number))
            if number.as_f64().is_some_and(|n| (0.0..=0.99).contains(&n)) => {}
        Some(_) => {
            return Err(invalid(
                "Input should be a valid effort",
                "reasoning_effort",
            ));
        }
    }
    if let Some(effort) = &effort {
        thinking = Some(effort != "none");
    }
    if let Some(thinking) = thinking {
        for key in ["thinking", "enable_thinking"] {
            kwargs.entry(key).or_insert(Value::Bool(thinking));
        }
    }
    // `_convert_to_internal_request` moves a `reasoning_effort` of the kwargs to the request's
    // field; `_apply_jinja_template` passes that field first, then the kwargs.
    if let Some(moved) = kwargs
        .shift_remove("reasoning_effort")
        .filter(|moved| !moved.is_null())
    {
        effort = Some(moved);
    }
    let mut variables = Map::new();
    if let Some(effort) = effort {
        variables.insert("reasoning_effort".into(), effort);
    }
    variables.extend(kwargs);
    Ok(variables)
}
