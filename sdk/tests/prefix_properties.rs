//! Properties of assembled prompts.
//!
//! 1. For any sequence of SDK operations without compaction, each turn extends the previous:
//!    the previous turn without its turn tier (what the SDK promises the next turn keeps) is a
//!    prefix of the next turn, as text and as tokens, in every output adapter. Bodies are
//!    rendered by kvlint's provider renderer; the template adapter by a small chat template.
//!    Within a turn the operations come in any order and number; each request is followed by
//!    the model's answer, as in any agent loop.
//! 2. Canonicalization is idempotent and insensitive to insertion order: schema keys in any
//!    order, `required` in any order, text composed or decomposed, tools added in any order.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use kvlint_render::render::{Rendered, Renderer};
use kvlint_request::request::Request;
use kvlint_sdk::canonical::canonical_schema;
use kvlint_sdk::{Conversation, Tool, ToolCall};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Map, Value, json};
use unicode_normalization::UnicodeNormalization;

use common::{agent_tools, shuffled, template_renderer};

/// Text with spaces, punctuation, and accents both composed and decomposed.
fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 .,:()é-]{0,24}|[a-z ]{0,8}e\u{301}[a-z ]{0,8}"
}

/// What happens in one turn, before its request is built; then the model answers.
#[derive(Clone, Debug)]
struct TurnPlan {
    context: Vec<String>,
    /// Context added before (else after) the turn's messages.
    context_first: bool,
    /// A session block set mid-session (key index, text).
    session_update: Option<(usize, String)>,
    /// A tool redefined mid-session (index into the pool).
    late_tool: Option<usize>,
    late_static: Option<String>,
    /// A user message after the tool results (always one when there are no results).
    user: Option<String>,
    /// The model's answer: its text and how many tools it calls.
    answer: String,
    calls: usize,
}

#[derive(Clone, Debug)]
struct Scenario {
    tool_order: u64,
    static_blocks: Vec<String>,
    session_blocks: Vec<(usize, String)>,
    /// Seed for the order the setup calls are made in.
    setup_order: u64,
    turns: Vec<TurnPlan>,
}

fn turn_plan() -> impl Strategy<Value = TurnPlan> {
    (
        prop::collection::vec(text(), 0..3),
        any::<bool>(),
        prop::option::weighted(0.3, (0..3usize, text())),
        prop::option::weighted(0.15, 0..4usize),
        prop::option::weighted(0.15, text()),
        prop::option::weighted(0.6, text()),
        text(),
        0..3usize,
    )
        .prop_map(
            |(
                context,
                context_first,
                session_update,
                late_tool,
                late_static,
                user,
                answer,
                calls,
            )| {
                TurnPlan {
                    context,
                    context_first,
                    session_update,
                    late_tool,
                    late_static,
                    user,
                    answer,
                    calls,
                }
            },
        )
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        any::<u64>(),
        prop::collection::vec(text(), 0..3),
        prop::collection::vec((0..3usize, text()), 0..3),
        any::<u64>(),
        prop::collection::vec(turn_plan(), 1..6),
    )
        .prop_map(
            |(tool_order, static_blocks, session_blocks, setup_order, turns)| Scenario {
                tool_order,
                static_blocks,
                session_blocks,
                setup_order,
                turns,
            },
        )
}

const SESSION_KEYS: [&str; 3] = ["memory", "profile", "repository"];

/// One call made while setting a conversation up.
type SetupCall = dyn Fn(&mut Conversation);

/// Runs the scenario and returns, for each request, the conversation as sent.
fn play(scenario: &Scenario) -> Vec<Conversation> {
    let mut conversation = Conversation::new();
    let tools = agent_tools();
    let mut setup: Vec<Box<SetupCall>> = Vec::new();
    for tool in shuffled(tools.clone(), scenario.tool_order) {
        setup.push(Box::new(move |conversation| {
            conversation.add_tool(tool.clone()).into_result().unwrap();
        }));
    }
    for text in scenario.static_blocks.clone() {
        setup.push(Box::new(move |conversation| {
            conversation.add_static(&text).into_result().unwrap();
        }));
    }
    for (key, text) in scenario.session_blocks.clone() {
        setup.push(Box::new(move |conversation| {
            conversation
                .add_session(SESSION_KEYS[key], &text)
                .into_result()
                .unwrap();
        }));
    }
    // Tools and tiers are added in any order relative to each other; static blocks keep
    // their own relative order (it is the caller's instruction order).
    let setup_order = shuffled((0..setup.len()).collect(), scenario.setup_order);
    for index in setup_order {
        setup[index](&mut conversation);
    }
    let mut open_calls: Vec<String> = Vec::new();
    let mut requests = Vec::new();
    for (turn, plan) in scenario.turns.iter().enumerate() {
        let add_context = |conversation: &mut Conversation| {
            for item in &plan.context {
                conversation.add_turn_context(item);
            }
        };
        if plan.context_first {
            add_context(&mut conversation);
        }
        if let Some((key, text)) = &plan.session_update {
            conversation
                .add_session(SESSION_KEYS[*key], text)
                .into_result()
                .unwrap();
        }
        for call in open_calls.drain(..) {
            conversation
                .push_tool_result(&call, format!("result of {call}"))
                .into_result()
                .unwrap();
        }
        match &plan.user {
            Some(text) => {
                // An empty message is refused (Anthropic rejects empty text blocks).
                let pushed = conversation.push_user(text).into_result();
                assert_eq!(pushed.is_err(), text.is_empty(), "{pushed:?}");
                if text.is_empty() {
                    conversation.push_user("go on").into_result().unwrap();
                }
            }
            None if conversation.history().is_empty()
                || conversation.history().last().map(|message| message.role())
                    == Some(kvlint_sdk::Role::Assistant) =>
            {
                conversation.push_user("go on").into_result().unwrap();
            }
            None => {}
        }
        if let Some(index) = plan.late_tool {
            let tool = &tools[index];
            conversation
                .add_tool(Tool::new(
                    tool.name(),
                    "redefined",
                    tool.parameters().clone(),
                ))
                .into_result()
                .unwrap();
        }
        if let Some(text) = &plan.late_static {
            conversation.add_static(text).into_result().unwrap();
        }
        if !plan.context_first {
            add_context(&mut conversation);
        }
        // The request: building a body commits the prefix.
        conversation.to_anthropic("claude-sonnet-4-5");
        requests.push(conversation.clone());
        let calls: Vec<ToolCall> = (0..plan.calls)
            .map(|call| {
                let id = format!("call_{turn}_{call}");
                open_calls.push(id.clone());
                if call % 2 == 0 {
                    ToolCall::new(id, "search", &json!({"query": plan.answer, "limit": call}))
                } else {
                    ToolCall::verbatim(id, "read_file", format!(r#"{{"path": "f{call}.rs"}}"#))
                }
            })
            .collect();
        let answered = conversation
            .push_assistant(&plan.answer, calls)
            .into_result();
        // An answer with neither text nor calls is refused; the loop asks the model again.
        let empty = plan.answer.is_empty() && plan.calls == 0;
        assert_eq!(answered.is_err(), empty, "{answered:?}");
        if empty {
            conversation
                .push_assistant("(asked again)", [])
                .into_result()
                .unwrap();
        }
    }
    requests
}

type Render<'a> = dyn Fn(&Conversation) -> Rendered + 'a;

fn provider_body(body: &Value, renderer: &Renderer) -> Rendered {
    renderer.render(&Request::from_body(body).unwrap()).unwrap()
}

/// Every adapter, rendered to text and tokens.
fn adapters<'a>(
    provider: &'a Renderer,
    template: &'a Renderer,
) -> Vec<(&'static str, Box<Render<'a>>)> {
    vec![
        (
            "openai-chat",
            Box::new(|conversation: &Conversation| {
                provider_body(&conversation.to_openai_chat("gpt-4.1"), provider)
            }),
        ),
        (
            "openai-responses",
            Box::new(|conversation: &Conversation| {
                provider_body(&conversation.to_openai_responses("gpt-4.1"), provider)
            }),
        ),
        (
            "anthropic",
            Box::new(|conversation: &Conversation| {
                provider_body(&conversation.to_anthropic("claude-sonnet-4-5"), provider)
            }),
        ),
        (
            "template",
            Box::new(|conversation: &Conversation| conversation.render(template).unwrap()),
        ),
    ]
}

fn check_prefix_extension(
    requests: &[Conversation],
    adapters: &[(&'static str, Box<Render<'_>>)],
) -> Result<(), TestCaseError> {
    for (name, render) in adapters {
        for (index, pair) in requests.windows(2).enumerate() {
            let (previous, next) = (&pair[0], &pair[1]);
            let kept = render(&previous.without_turn_tier());
            let sent = render(previous);
            if previous.turn_tier().is_none() {
                prop_assert_eq!(&kept.text, &sent.text, "{}: turn {}", name, index);
            }
            let next = render(next);
            prop_assert!(
                next.text.starts_with(&kept.text),
                "{name}: turn {} does not extend turn {index}\n--- kept\n{}\n--- next\n{}",
                index + 1,
                kept.text,
                next.text
            );
            let (kept_ids, next_ids) = (kept.tokens.ids(), next.tokens.ids());
            prop_assert!(
                next_ids.starts_with(&kept_ids),
                "{name}: turn {}'s tokens do not extend turn {index}'s",
                index + 1
            );
            // The turn tier sits after everything the next turn keeps, but for the end of the
            // newest message (`<|im_end|>\n`, `<|end|>\n`) when it is appended to it.
            let shared_with_kept = common_prefix(&sent.text, &kept.text);
            prop_assert!(
                shared_with_kept + "<|im_end|>\n".len() >= kept.text.len(),
                "{name}: turn {index}'s tier is not last: it diverges from the kept prompt at byte {shared_with_kept} of {}",
                kept.text.len()
            );
        }
    }
    Ok(())
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(a, b)| a == b).count()
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

#[test]
fn every_turn_extends_the_previous_in_every_adapter() {
    let provider = Renderer::provider();
    let template = template_renderer(false);
    let adapters = adapters(&provider, &template);
    runner(48)
        .run(&scenario(), |scenario| {
            check_prefix_extension(&play(&scenario), &adapters)
        })
        .unwrap();
}

#[test]
fn the_routing_key_holds_for_the_whole_session() {
    runner(32)
        .run(&scenario(), |scenario| {
            let requests = play(&scenario);
            let key = requests[0].routing_key();
            for request in &requests {
                prop_assert_eq!(&request.routing_key(), &key);
                prop_assert_eq!(
                    &request.to_openai_chat("m")["prompt_cache_key"],
                    &json!(key)
                );
            }
            for pair in requests.windows(2) {
                let (previous, next) = (pair[0].fingerprint(), pair[1].fingerprint());
                prop_assert_eq!(next.common_blocks(&previous), previous.blocks.len());
            }
            Ok(())
        })
        .unwrap();
}

/// A JSON Schema; `required` only ever appears as a schema keyword.
fn schema() -> impl Strategy<Value = Value> {
    let name = "[a-z]{1,6}";
    let data = prop_oneof![
        text().prop_map(Value::String),
        any::<i32>().prop_map(|number| json!(number)),
        (name, text()).prop_map(|(key, value)| json!({ key: value, "z": [1, 2] })),
    ];
    let leaf = (
        prop::sample::select(vec!["string", "integer", "boolean", "null"]),
        text(),
        prop::collection::vec(data.clone(), 0..3),
        prop::option::of(data),
    )
        .prop_map(|(kind, description, values, default)| {
            let mut schema = Map::new();
            schema.insert("type".into(), json!(kind));
            schema.insert("description".into(), json!(description));
            if !values.is_empty() {
                schema.insert("enum".into(), Value::Array(values));
            }
            if let Some(default) = default {
                schema.insert("default".into(), default);
            }
            Value::Object(schema)
        });
    leaf.prop_recursive(3, 24, 4, move |inner| {
        prop_oneof![
            prop::collection::vec((name, inner.clone(), any::<bool>()), 0..4).prop_map(
                |properties| {
                    let required: Vec<&String> = properties
                        .iter()
                        .filter(|(_, _, required)| *required)
                        .map(|(name, _, _)| name)
                        .collect();
                    let schemas: Map<String, Value> = properties
                        .iter()
                        .map(|(name, schema, _)| (name.clone(), schema.clone()))
                        .collect();
                    json!({"type": "object", "properties": schemas, "required": required})
                }
            ),
            inner
                .clone()
                .prop_map(|items| json!({"type": "array", "items": items})),
            prop::collection::vec(inner.clone(), 1..3)
                .prop_map(|schemas| json!({"type": "array", "prefixItems": schemas})),
            prop::collection::vec(inner, 1..3).prop_map(|schemas| json!({"anyOf": schemas})),
        ]
    })
}

/// The same schema as a caller might build it: every object's keys in another order,
/// `required` in another order, text decomposed (NFD). Arrays that carry meaning are kept.
fn rebuilt(value: &Value, seed: u64) -> Value {
    match value {
        Value::String(text) => Value::String(text.nfd().collect()),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(index, item)| rebuilt(item, seed.wrapping_add(index as u64)))
                .collect(),
        ),
        Value::Object(object) => {
            let entries: Vec<(&String, &Value)> = object.iter().collect();
            shuffled(entries, seed)
                .into_iter()
                .map(|(key, value)| {
                    let value = match value {
                        Value::Array(names) if key == "required" => {
                            Value::Array(shuffled(names.clone(), seed.rotate_left(7)))
                        }
                        other => rebuilt(other, seed.rotate_left(3) ^ key.len() as u64),
                    };
                    (key.nfd().collect(), value)
                })
                .collect::<Map<String, Value>>()
                .into()
        }
        other => other.clone(),
    }
}

#[test]
fn canonical_schemas_ignore_insertion_order_and_are_idempotent() {
    runner(256)
        .run(&(schema(), any::<u64>()), |(schema, seed)| {
            let canonical = canonical_schema(&schema);
            let other = canonical_schema(&rebuilt(&schema, seed));
            prop_assert_eq!(canonical.to_string(), other.to_string());
            prop_assert_eq!(
                canonical_schema(&canonical).to_string(),
                canonical.to_string()
            );
            Ok(())
        })
        .unwrap();
}

#[test]
fn tools_added_in_any_order_give_the_same_bodies() {
    let strategy = (
        prop::collection::btree_map("[a-z_]{1,10}", (text(), schema()), 1..6),
        any::<u64>(),
        any::<u64>(),
    );
    runner(64)
        .run(&strategy, |(definitions, first_order, second_order)| {
            let build = |order: u64, rebuild: bool| {
                let tools: Vec<Tool> = definitions
                    .iter()
                    .map(|(name, (description, schema))| {
                        let schema = if rebuild {
                            rebuilt(schema, order)
                        } else {
                            schema.clone()
                        };
                        Tool::new(name, description, schema)
                    })
                    .collect();
                let mut conversation = Conversation::new();
                for tool in shuffled(tools, order) {
                    conversation.add_tool(tool).into_result().unwrap();
                }
                conversation
                    .add_static("Be terse.")
                    .push_user("hi")
                    .into_result()
                    .unwrap();
                conversation
            };
            let (first, second) = (build(first_order, false), build(second_order, true));
            prop_assert_eq!(
                first.to_openai_chat("m").to_string(),
                second.to_openai_chat("m").to_string()
            );
            prop_assert_eq!(
                first.to_openai_responses("m").to_string(),
                second.to_openai_responses("m").to_string()
            );
            prop_assert_eq!(
                first.to_anthropic("m").to_string(),
                second.to_anthropic("m").to_string()
            );
            prop_assert_eq!(first.fingerprint(), second.fingerprint());
            let names: Vec<&str> = first.tools().map(Tool::name).collect();
            prop_assert!(names.windows(2).all(|pair| pair[0] < pair[1]));
            Ok(())
        })
        .unwrap();
}
