//! A program written against kvlint-sdk's public API as of version 0.1.0, through the SDK's
//! own paths only: it must keep compiling, and a change that stops it is a break (a new version
//! and a CHANGELOG.md entry, see CONTRIBUTING.md). It spells out the types a user's code
//! names, builds the structs a user can build, and matches the enums exhaustively, so that a
//! changed signature, field or variant fails here. It covers the types the SDK re-exports from
//! kvlint's other crates too (renderer, findings), which `scripts/semver-check.sh`'s snapshot
//! names but does not describe. Change it only together with a recorded break.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kvlint_sdk::canonical::{canonical_json, canonical_schema, nfc};
use kvlint_sdk::{
    ANTHROPIC_DEFAULT_MAX_TOKENS, CacheBreak, Change, ChangeReport, ChatTemplate, Conversation,
    ConversationError, Diagnostic, Effect, EngineRequest, Guard, GuardCounters, GuardError,
    GuardMode, HistoryWindow, InputError, Message, Observation, Part, PartPath, PrefixChange,
    PrefixFingerprint, ROUTING_KEY_HEADER, RenderError, Renderer, Role, SGLANG_ROUTING_KEY_HEADER,
    Severity, Source, Span, Tokenizer, Tool, ToolCall, ToolDefinitionError, VllmServer,
    VolatileValue,
};
use serde_json::{Value, json};

fn assembled() -> Result<Conversation, ConversationError> {
    let mut conversation: Conversation = Conversation::new();
    let tool: Tool = Tool::new("run_tests", "Run the tests.", json!({"type": "object"}));
    let change: Change<'_> = conversation.add_tool(tool);
    let report: ChangeReport = change.into_result()?;
    let ChangeReport { effect, volatile } = report;
    let _: Vec<VolatileValue> = volatile;
    let _ = describe_effect(&effect);
    let change = conversation.add_static("You are a coding agent.");
    let _: Option<&Effect> = change.effect();
    let _: Option<&ConversationError> = change.error();
    let _: &[VolatileValue] = change.volatile();
    let _: bool = change.is_clean();
    conversation
        .add_session("memory", "Prefers small commits.")
        .into_result()?;
    conversation
        .push_user("Fix the failing test.")
        .into_result()?;
    let _: &mut Conversation = conversation.add_turn_context("Time: 2025-03-04T10:22:31Z");
    Ok(conversation)
}

fn describe_effect(effect: &Effect) -> String {
    match effect {
        Effect::Applied => "applied".to_owned(),
        Effect::Unchanged => "unchanged".to_owned(),
        Effect::Deferred {
            change,
            lost_blocks,
        } => format!("{} ({lost_blocks} blocks)", describe_change(change)),
    }
}

fn describe_change(change: &PrefixChange) -> String {
    match change {
        PrefixChange::Tool(tool) => tool.name().to_owned(),
        PrefixChange::Static(text) => text.clone(),
        PrefixChange::Session { key, text } => format!("{key}: {text}"),
    }
}

fn describe_error(error: &ConversationError) -> String {
    match error {
        ConversationError::Empty { role } => (*role).to_owned(),
        ConversationError::ToolArguments { call_id, reason } => format!("{call_id} {reason}"),
        ConversationError::UnknownToolCall { call_id } => call_id.clone(),
        ConversationError::AssistantFirst => String::new(),
        ConversationError::CommittedTier {
            change,
            lost_blocks,
        } => format!("{} {lost_blocks}", describe_change(change)),
        ConversationError::Volatile {
            tier,
            class,
            value,
            rule,
        } => format!("{tier} {class} {value} {rule}"),
        ConversationError::Body { path, message } => format!("{path} {message}"),
    }
}

fn describe_guard_error(error: &GuardError) -> String {
    match error {
        GuardError::Body {
            turn,
            part,
            message,
        } => {
            let part: &PartPath = part;
            format!("{turn} {part:?} {message}")
        }
        GuardError::Input(input) => {
            let input: &InputError = input;
            input.to_string()
        }
        GuardError::Breaks { turn, diagnostics } => {
            let diagnostics: &Vec<Diagnostic> = diagnostics;
            format!("{turn} {}", diagnostics.len())
        }
    }
}

fn describe_render_error(error: &RenderError) -> String {
    match error {
        RenderError::Body { path, message } => format!("{path} {message}"),
        RenderError::Template(input) => input.to_string(),
    }
}

fn describe_diagnostic(diagnostic: &Diagnostic) -> String {
    let severity = match diagnostic.severity {
        Severity::Info => "info",
        Severity::Warning => "warning",
        Severity::Error => "error",
    };
    let rule: &'static str = diagnostic.rule;
    let code: &'static str = diagnostic.code;
    let span: Option<Span> = diagnostic.span;
    let line = span.map_or(0, |span| span.line);
    format!(
        "{severity} {rule} {code} turn {} part {:?} line {line}: {} ({} tokens lost; {})",
        diagnostic.turn,
        diagnostic.part,
        diagnostic.message,
        diagnostic.tokens_lost,
        diagnostic.help
    )
}

fn role(message: &Message) -> &'static str {
    let role: Role = message.role();
    match role {
        Role::User | Role::Assistant | Role::Tool => role.as_str(),
    }
}

fn part(part: &Part) -> String {
    match part {
        Part::Text { text } => text.clone(),
        Part::Image { source, detail } => format!("{} {detail:?}", source_text(source)),
        Part::Document { source, title } => format!("{} {title:?}", source_text(source)),
        Part::Thinking { block } | Part::ServerTool { block } => block.to_string(),
        Part::ResponsesItem { item } => item.to_string(),
    }
}

fn source_text(source: &Source) -> String {
    match source {
        Source::Url { url } => url.clone(),
        Source::Base64 { media_type, data } => format!("{media_type} {}", data.len()),
        Source::File { file_id } => file_id.clone(),
    }
}

#[test]
fn a_program_written_against_the_0_1_0_api_still_compiles_and_runs() {
    let mut conversation = assembled().unwrap();
    let strict: Conversation = Conversation::strict();
    assert!(strict.is_strict());
    let preview: Conversation = conversation.preview();
    let _: Conversation = preview.without_turn_tier();
    let _: Option<String> = conversation.turn_tier();

    let chat: Value = conversation.to_openai_chat("gpt-4.1");
    let _: Value = conversation.to_openai_responses("gpt-4.1");
    let anthropic: Value = conversation.to_anthropic("claude-sonnet-4-5");
    assert_eq!(anthropic["max_tokens"], json!(ANTHROPIC_DEFAULT_MAX_TOKENS));
    assert!(conversation.is_committed());
    let pending: Vec<PrefixChange> = conversation.pending_changes();
    assert!(pending.iter().map(describe_change).count() == pending.len());

    let mut guard: Guard = Guard::new(Renderer::provider(), GuardMode::Warn);
    let observed: Result<Observation, GuardError> = guard.observe(&chat);
    let observation: Observation = observed.unwrap();
    assert!(observation.is_clean());
    let _: usize = observation.tokens_lost();
    let findings: Vec<&Diagnostic> = observation
        .errors()
        .chain(observation.warnings())
        .chain(observation.costs())
        .collect();
    assert!(findings.iter().all(|d| !describe_diagnostic(d).is_empty()));
    let as_slice: &[Diagnostic] = &observation;
    assert_eq!(as_slice.len(), observation.clone().into_vec().len());
    for diagnostic in &observation {
        let _: &Diagnostic = diagnostic;
    }
    let mode: GuardMode = guard.mode();
    assert!(matches!(mode, GuardMode::Warn | GuardMode::Error));
    let counters: &GuardCounters = guard.counters();
    let GuardCounters {
        turns,
        refused_turns,
        prompt_tokens,
        reused_tokens,
        recomputed_tokens,
        dropped_tokens,
        breaks_by_rule,
        expected_breaks,
    } = counters.clone();
    assert_eq!((turns, refused_turns, expected_breaks), (1, 0, 0));
    let _ = (
        prompt_tokens,
        reused_tokens,
        recomputed_tokens,
        dropped_tokens,
    );
    let _: std::collections::BTreeMap<String, usize> = breaks_by_rule;

    let answer = json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "run_tests", "arguments": "{}"}}]}}]});
    conversation
        .push_openai_response(&answer)
        .into_result()
        .unwrap();
    let call: &ToolCall = &conversation.history().last().unwrap().tool_calls()[0];
    let (id, name, arguments): (&str, &str, &str) = (call.id(), call.name(), call.arguments());
    assert_eq!((id, name, arguments), ("call_1", "run_tests", "{}"));
    conversation
        .push_tool_result("call_1", "1 failed")
        .into_result()
        .unwrap();
    conversation
        .push_tool_result_parts("call_2", [Part::text("unknown")])
        .into_result()
        .unwrap_err();
    conversation
        .push_assistant("Fixed.", Vec::<ToolCall>::new())
        .into_result()
        .unwrap();
    conversation
        .push_user_parts([Part::image(Source::from_url("https://example.com/a.png"))])
        .into_result()
        .unwrap();
    let parts = [
        Part::thinking("Read it.", "EqQBCgIYAh"),
        Part::redacted_thinking("data"),
        Part::document(Source::from_url("https://example.com/a.pdf"), None),
        Part::from_block(&json!({"type": "text", "text": "ok"})).unwrap(),
    ];
    let calls = [ToolCall::verbatim("call_3", "run_tests", "{}")];
    conversation
        .push_assistant_parts(parts.clone(), calls)
        .into_result()
        .unwrap();
    let _ = conversation.push_responses_output(&json!({"output": []}));
    let _ = conversation.push_anthropic_response(&json!({"content": []}));
    for message in conversation.history() {
        let _: (&str, String, &[Part], &[String], Option<&str>) = (
            role(message),
            message.text(),
            message.parts(),
            message.notes(),
            message.tool_call_id(),
        );
    }
    assert!(parts.iter().all(|p| !part(p).is_empty()));

    let window = HistoryWindow {
        max_messages: 4,
        keep_messages: 2,
    };
    assert_eq!(window, HistoryWindow::new(4, 2));
    let cache_break: Option<CacheBreak> = conversation.enforce_window(&window);
    let CacheBreak {
        dropped_messages,
        kept_messages,
        kept_beyond_asked,
        reused_blocks,
        lost_blocks,
        applied_changes,
    } = cache_break.unwrap();
    let _ = (
        dropped_messages,
        kept_messages,
        kept_beyond_asked,
        reused_blocks,
        lost_blocks,
    );
    let _: Vec<PrefixChange> = applied_changes;
    let compacted: CacheBreak = conversation.compact(100);
    assert!(compacted.is_empty() || compacted.dropped_messages == 0);
    guard.expect_break();
    guard.reset();
    let _: &mut Conversation = conversation.clear_turn_context();

    let fingerprint: PrefixFingerprint = conversation.fingerprint();
    let PrefixFingerprint { blocks, key } = fingerprint.clone();
    assert_eq!(
        fingerprint.common_blocks(&PrefixFingerprint { blocks, key }),
        fingerprint.blocks.len()
    );
    let key: String = conversation.routing_key();
    let headers: [(&'static str, String); 2] = conversation.routing_headers();
    assert_eq!(headers[0], (ROUTING_KEY_HEADER, key));
    assert_eq!(headers[1].0, SGLANG_ROUTING_KEY_HEADER);
    let _: Vec<&Tool> = conversation.tools().collect();

    let tool: Result<Tool, ToolDefinitionError> = Tool::from_definition(&json!({"name": "x"}));
    if let Err(ToolDefinitionError { reason }) = &tool {
        assert!(!reason.is_empty());
    }
    let tool = Tool::new("read", "Read a file.", json!({"type": "object"}));
    let _: (&str, &str, &Value, String) = (
        tool.name(),
        tool.description(),
        tool.parameters(),
        tool.canonical_text(),
    );
    let _: ToolCall = ToolCall::new("call_4", "read", &json!({"path": "a"}));
    let _: (Value, Value, String) = (
        canonical_json(&json!({"b": 1, "a": 2})),
        canonical_schema(&json!({"type": "object"})),
        nfc("e\u{301}"),
    );
    let imported: Result<Conversation, ConversationError> = Conversation::from_body(&chat);
    imported.unwrap();
    let refused = Conversation::new().push_user("").into_result().unwrap_err();
    assert!(!describe_error(&refused).is_empty());
    let _ = VolatileValue {
        tier: "static",
        class: "timestamp",
        value: String::new(),
        rule: "volatile-timestamp",
        code: "KV101",
    };

    // The renderer a self-hosted engine needs, built from the SDK's re-exports.
    let path = std::env::temp_dir().join(format!("kvlint-sdk-compat-{}.jinja", std::process::id()));
    std::fs::write(
        &path,
        "{% for m in messages %}{{ m.content }}\n{% endfor %}",
    )
    .unwrap();
    let now = chrono::NaiveDate::from_ymd_opt(2025, 3, 4)
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap();
    let template: Result<ChatTemplate, InputError> = ChatTemplate::from_file(&path, now);
    let template = template.unwrap();
    std::fs::remove_file(&path).ok();
    let request: EngineRequest = EngineRequest::Vllm(Box::new(VllmServer::for_template(&template)));
    let renderer = Renderer::Engine {
        request,
        template: Box::new(template),
        tokenizer: Tokenizer::o200k_base(),
        add_generation_prompt: false,
    };
    let rendered = assembled()
        .unwrap()
        .render(&renderer)
        .map_err(|e| describe_render_error(&e))
        .unwrap();
    let _: &String = &rendered.text;
    assert!(!rendered.tokens.is_empty());
    let error = GuardError::Breaks {
        turn: 1,
        diagnostics: Vec::new(),
    };
    assert!(!describe_guard_error(&error).is_empty());
}
