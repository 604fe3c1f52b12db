//! Helpers shared by the SDK's integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::NaiveDate;
use kvlint_render::render::{EngineRequest, Renderer};
use kvlint_render::template::ChatTemplate;
use kvlint_render::tokenize::Tokenizer;
use kvlint_sdk::Tool;
use serde_json::json;

/// A small chat template in the usual shape: tools first, then each message between role
/// markers, tool calls with their arguments as JSON.
pub const CHAT_TEMPLATE: &str = "\
{%- for tool in tools or [] %}<|tool|>{{ tool | tojson }}<|end|>\n{% endfor %}
{%- for message in messages %}<|{{ message.role }}|>
{%- if message.content %}{{ message.content }}{% endif %}
{%- for call in message.tool_calls or [] %}<|call|>{{ call.function.name }} {{ call.function.arguments | tojson }}{% endfor %}<|end|>\n{% endfor %}
{%- if add_generation_prompt %}<|assistant|>{% endif %}";

/// A file under the system temp directory, unique to this process and call.
pub fn temp_path(name: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "kvlint-sdk-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Engine mode with [`CHAT_TEMPLATE`] and the embedded tokenizer.
pub fn template_renderer(add_generation_prompt: bool) -> Renderer {
    let path = temp_path("template.jinja");
    std::fs::write(&path, CHAT_TEMPLATE).unwrap();
    let now = NaiveDate::from_ymd_opt(2025, 3, 4)
        .and_then(|date| date.and_hms_opt(10, 0, 0))
        .unwrap();
    Renderer::Engine {
        template: Box::new(ChatTemplate::from_file(&path, now).unwrap()),
        tokenizer: Tokenizer::o200k_base(),
        add_generation_prompt,
        request: EngineRequest::AsSent,
    }
}

/// A coding agent's tools.
pub fn agent_tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "read_file",
            "Read a file of the repository.",
            json!({"type": "object", "required": ["path"], "properties": {
                "path": {"type": "string", "description": "Path from the repository root"},
                "range": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer"}]}}}),
        ),
        Tool::new(
            "write_file",
            "Write a file.",
            json!({"type": "object", "required": ["path", "content"], "properties": {
                "path": {"type": "string"}, "content": {"type": "string"},
                "mode": {"enum": ["overwrite", "append"]}}}),
        ),
        Tool::new(
            "run_tests",
            "Run the test suite.",
            json!({"type": "object", "properties": {"filter": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}),
        ),
        Tool::new(
            "search",
            "Search the code.",
            json!({"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}}),
        ),
    ]
}

/// A deterministic shuffle (xorshift), to add things in an order the test does not choose.
pub fn shuffled<T>(mut items: Vec<T>, seed: u64) -> Vec<T> {
    let mut state = seed | 1;
    for index in (1..items.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let other = (state % (index as u64 + 1)) as usize;
        items.swap(index, other);
    }
    items
}

/// kvlint's Anthropic breakpoint audit of a session (JSONL) finds nothing but breakpoints
/// below the model's minimum: the test prompts are short.
pub fn assert_breakpoints_only_below_minimum(jsonl: &str) {
    let session =
        kvlint_core::SessionFile::parse("session.jsonl".into(), std::sync::Arc::from(jsonl))
            .unwrap();
    let engine = "anthropic".parse::<kvlint_core::Engine>().unwrap();
    let checked =
        kvlint_rules::check_session(&session, &Renderer::provider(), Some(&engine)).unwrap();
    for finding in &checked.findings {
        assert!(
            finding.rule != "cache-breakpoint"
                || finding.message.contains("below the model's minimum"),
            "{finding:?}"
        );
    }
}
