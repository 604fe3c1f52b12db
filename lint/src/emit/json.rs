//! The JSON report: a contract, versioned.

use super::Output;

pub fn render(output: &Output<'_>) -> String {
    serde_json::to_string_pretty(output).unwrap_or_default() + "\n"
}
