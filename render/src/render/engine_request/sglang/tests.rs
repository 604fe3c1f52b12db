use serde_json::json;

use super::*;

const STRING_TEMPLATE: &str = "{% for m in messages %}{{ m.content }}{% endfor %}";
const PARTS_TEMPLATE: &str =
    "{% for m in messages %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}";

fn input(source: &str, body: Value) -> Result<(Vec<Value>, Option<Vec<Value>>), RenderError> {
    let (_, mut template) = super::super::template_file(source);
    let server = SglangServer::serving(&mut template);
    let request = Request::from_body(&body).unwrap();
    let input = server.template_input(&request, &template, true)?;
    Ok((
        input.messages.into_iter().map(Cow::into_owned).collect(),
        input
            .tools
            .map(|tools| tools.into_iter().map(Cow::into_owned).collect()),
    ))
}

#[test]
fn content_format_is_detected_as_sglang_detects_it() {
    assert!(!takes_content_as_parts(STRING_TEMPLATE));
    assert!(takes_content_as_parts(PARTS_TEMPLATE));
    assert!(takes_content_as_parts(
        "{% for c in message['content'] | selectattr('type') %}{% endfor %}"
    ));
    // Any mention of images makes the "openai" format, loop or not.
    assert!(takes_content_as_parts("{# no vision here #}{{ messages }}"));
    // Unlike vLLM, an assigned name is not followed.
    assert!(!takes_content_as_parts(
        "{% for x in messages %}{% set c = x.content %}{% for p in c %}{% endfor %}{% endfor %}"
    ));
}

#[test]
fn text_parts_are_joined_with_a_space_or_kept_as_parts() {
    let body = json!({"messages": [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}, {"type": "text", "text": "c"}], "name": "x"},
        {"role": "tool", "tool_call_id": "1", "content": [{"type": "text", "text": "d"}, {"type": "text", "text": "e"}]},
        {"role": "user", "content": "next"}]});
    let (messages, _) = input(STRING_TEMPLATE, body.clone()).unwrap();
    assert_eq!(messages[0]["content"], "a b");
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": "c", "name": "x"})
    );
    assert_eq!(messages[2]["content"], "d e");
    let (messages, _) = input(PARTS_TEMPLATE, body).unwrap();
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "name": "x", "content": [{"type": "text", "text": "c"}]})
    );
    assert_eq!(
        serde_json::to_string(&messages[1]).unwrap(),
        r#"{"role":"assistant","name":"x","content":[{"type":"text","text":"c"}]}"#,
        "the content key moves last"
    );
    assert_eq!(
        messages[2]["content"], "d e",
        "tool text parts are joined in both formats"
    );
}

#[test]
fn a_last_assistant_message_becomes_a_user_message() {
    let body = json!({"messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"b\": 1, \"a\": 2}"}}]}]});
    let (messages, _) = input(STRING_TEMPLATE, body).unwrap();
    assert_eq!(messages[1], json!({"role": "user", "content": ""}));
    let body = json!({"messages": [
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"b\": 1, \"a\": 2}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "ok"}]});
    let (messages, _) = input(STRING_TEMPLATE, body).unwrap();
    assert_eq!(
        serde_json::to_string(&messages[0]["tool_calls"]).unwrap(),
        r#"[{"id":"c","index":null,"type":"function","function":{"name":"f","arguments":{"b":1,"a":2}}}]"#
    );
}

#[test]
fn tools_reach_the_template_unless_tool_choice_is_none() {
    let tools = json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"n": {"type": "bigint"}}}}}]);
    let body = json!({"messages": [{"role": "user", "content": "hi"}], "tools": tools});
    let (_, dumped) = input(STRING_TEMPLATE, body.clone()).unwrap();
    assert_eq!(
        dumped.unwrap()[0],
        json!({"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}, "description": null}, "defer_loading": null})
    );
    let mut none = body.clone();
    none["tool_choice"] = json!("none");
    assert_eq!(input(STRING_TEMPLATE, none).unwrap().1, None);
    let mut named = body;
    named["tool_choice"] = json!({"type": "function", "function": {"name": "g"}});
    assert!(matches!(
        input(STRING_TEMPLATE, named),
        Err(RenderError::Refused { .. })
    ));
}

#[test]
fn requests_sglang_refuses_are_refused() {
    for body in [
        json!({"messages": []}),
        json!({"model": null, "messages": [{"role": "user", "content": "x"}]}),
        json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}]}),
        json!({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}, {"role": "user", "content": "x"}]}),
        json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "any"}}}]}),
    ] {
        let result = input(STRING_TEMPLATE, body.clone());
        assert!(
            matches!(result, Err(RenderError::Refused { .. })),
            "{body}: {result:?}"
        );
    }
}

#[test]
fn reasoning_effort_sets_the_thinking_variables() {
    let body = json!({"reasoning_effort": "none", "chat_template_kwargs": {"x": 1}});
    let variables = template_variables(body.as_object().unwrap()).unwrap();
    assert_eq!(
        Value::Object(variables),
        json!({"reasoning_effort": "none", "x": 1, "thinking": false, "enable_thinking": false})
    );
}

#[test]
fn gpt_oss_refuses_no_reasoning_and_its_responses_are_not_modelled() {
    let (_, mut template) = super::super::template_file(STRING_TEMPLATE);
    let server = SglangServer::serving(&mut template).serving_gpt_oss();
    let render = |body: Value| {
        let request = Request::from_body(&body).unwrap();
        server.template_input(&request, &template, true).map(|_| ())
    };
    let user = json!([{"role": "user", "content": "x"}]);
    assert!(render(json!({"messages": user})).is_ok());
    for body in [
        json!({"messages": user, "reasoning_effort": "none"}),
        json!({"messages": user, "chat_template_kwargs": {"reasoning_effort": "none"}}),
    ] {
        assert!(
            matches!(render(body.clone()), Err(RenderError::Refused { .. })),
            "{body}"
        );
    }
    assert!(matches!(
        render(json!({"model": "m", "input": "x"})),
        Err(RenderError::NotModelled { .. })
    ));
}
