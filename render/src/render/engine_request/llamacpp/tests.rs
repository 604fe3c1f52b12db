use super::*;

const STRING_TEMPLATE: &str = "{% for m in messages %}{{ m.content }}{% endfor %}";
const PARTS_TEMPLATE: &str =
    "{% for m in messages %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}";

type Input = (Vec<Value>, Option<Vec<Value>>, bool, String);

fn chat_template(source: &str) -> ChatTemplate {
    super::super::template_file(source).1
}

fn input(source: &str, body: Value) -> Result<Input, RenderError> {
    let request = Request::from_body(&body).map_err(|error| refused(error.message))?;
    let mut template = chat_template(source);
    let server = LlamaCppServer::serving(&mut template);
    let input = server.template_input(&request, &template, false)?;
    if let Some(with) = &input.template {
        assert_eq!(with.kwargs.get(ENABLE_THINKING), Some(&Value::Bool(false)));
    }
    Ok((
        input.messages.into_iter().map(Cow::into_owned).collect(),
        input
            .tools
            .map(|tools| tools.into_iter().map(Cow::into_owned).collect()),
        input.add_generation_prompt,
        input.prefill,
    ))
}

#[test]
fn messages_and_tools_are_written_back_in_llama_cpp_order() {
    let body = json!({
        "tools": [{"function": {"parameters": {"type": "object"}, "strict": true, "name": "f"}, "type": "function"}],
        "messages": [
            {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "role": "user", "extra": 1},
            {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "id": "c1", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ],
    });
    let (messages, tools, add_generation_prompt, prefill) =
        input(STRING_TEMPLATE, body.clone()).unwrap();
    assert_eq!(
        serde_json::to_string(&tools).unwrap(),
        r#"[{"type":"function","function":{"name":"f","description":"","parameters":{"type":"object"}}}]"#
    );
    assert_eq!(messages[0], json!({"role": "user", "content": "a\nb"}));
    assert_eq!(
        serde_json::to_string(&messages[1]).unwrap(),
        r#"{"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"f","arguments":{"x":1}},"id":"c1"}]}"#
    );
    assert_eq!(
        messages[2],
        json!({"role": "tool", "content": "ok", "tool_call_id": "c1"})
    );
    assert!(!add_generation_prompt && prefill.is_empty());
    // A template that iterates content gets the parts.
    let (messages, ..) = input(PARTS_TEMPLATE, body).unwrap();
    assert_eq!(
        messages[0]["content"],
        json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
    );
}

#[test]
fn a_last_assistant_message_is_a_prefill_and_two_are_refused() {
    let (messages, _, add_generation_prompt, prefill) = input(
        STRING_TEMPLATE,
        json!({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure"}]}),
    )
    .unwrap();
    assert_eq!(messages.len(), 1);
    assert!(add_generation_prompt);
    assert_eq!(prefill, "Sure");
    // A template that reads `enable_thinking` renders a prefill with it off.
    let thinking = "{{ enable_thinking }}{% for m in messages %}{{ m.content }}{% endfor %}";
    let request = Request::from_body(
        &json!({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure"}]}),
    )
    .unwrap();
    let mut template = chat_template(thinking);
    let server = LlamaCppServer::serving(&mut template);
    assert_eq!(
        template.kwargs.get(ENABLE_THINKING),
        Some(&Value::Bool(true))
    );
    let prefilled = server.template_input(&request, &template, false).unwrap();
    let off = prefilled.template.expect("a template with thinking off");
    assert_eq!(off.kwargs.get(ENABLE_THINKING), Some(&Value::Bool(false)));
    let two = input(
        STRING_TEMPLATE,
        json!({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}]}),
    );
    assert!(two.unwrap_err().to_string().contains("refuses"));
}

#[test]
fn what_llama_server_refuses_is_refused_with_its_reason() {
    for (body, reason) in [
        (
            json!({"tools": [{"function": {"name": "f"}}], "messages": [{"role": "user", "content": "hi"}]}),
            "Missing tool type",
        ),
        (
            json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]}]}),
            "image input is not supported",
        ),
        (
            json!({"messages": [{"role": "assistant", "content": "x", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}, {"role": "user", "content": "hi"}]}),
            "Missing tool call type",
        ),
    ] {
        let error = input(STRING_TEMPLATE, body).unwrap_err();
        let RenderError::Refused { reason: got, .. } = &error else {
            panic!("{error:?}");
        };
        assert!(got.contains(reason), "{got}");
    }
}

#[test]
fn an_anthropic_body_is_converted_as_llama_server_converts_it() {
    let body = json!({
        "system": [{"type": "text", "text": "Be "}, {"type": "text", "text": "terse."}],
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "tool_use", "id": "t1", "name": "f", "input": {"x": 1}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "4"}, {"type": "text", "text": "2"}]},
                {"type": "text", "text": "go on"},
            ]},
        ],
    });
    let (messages, tools, ..) = input(STRING_TEMPLATE, body).unwrap();
    assert_eq!(
        serde_json::to_string(&tools).unwrap(),
        r#"[{"type":"function","function":{"name":"f","description":"","parameters":{"type":"object"}}}]"#
    );
    let expected = [
        json!({"role": "system", "content": "Be terse."}),
        json!({"role": "user", "content": "hi"}),
        json!({"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}, "id": "t1"}]}),
        // The text of the user's message first, then the tool results it carried.
        json!({"role": "user", "content": "go on"}),
        json!({"role": "tool", "content": "42", "tool_call_id": "t1"}),
    ];
    assert_eq!(messages, expected);
}

#[test]
fn a_responses_body_is_converted_as_llama_server_converts_it() {
    let body = json!({
        "instructions": "Be terse.",
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        "input": [
            {"role": "developer", "content": "Use tools."},
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "think"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{\"x\":1}"},
            {"type": "function_call_output", "call_id": "c1", "output": "42"},
        ],
    });
    let (messages, tools, ..) = input(STRING_TEMPLATE, body).unwrap();
    assert_eq!(
        serde_json::to_string(&tools).unwrap(),
        r#"[{"type":"function","function":{"name":"f","description":"","parameters":{"type":"object"}}}]"#
    );
    let expected = [
        json!({"role": "system", "content": "Be terse."}),
        // The developer role is kept.
        json!({"role": "developer", "content": "Use tools."}),
        json!({"role": "user", "content": "hi"}),
        // Reasoning, then the call merged into the same assistant message.
        json!({"role": "assistant", "content": "", "reasoning_content": "think", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}, "id": "c1"}]}),
        json!({"role": "tool", "content": "42", "tool_call_id": "c1"}),
    ];
    assert_eq!(messages, expected);
    // A reasoning item without content, as simonw/llm sends it, is refused.
    let refused = input(
        STRING_TEMPLATE,
        json!({"input": [{"role": "user", "content": "hi"}, {"type": "reasoning", "summary": []}]}),
    );
    assert!(refused.unwrap_err().to_string().contains("is not an array"));
}
