use super::*;
use serde_json::json;

fn now() -> NaiveDateTime {
    chrono::NaiveDate::from_ymd_opt(2026, 11, 29)
        .and_then(|date| date.and_hms_opt(10, 0, 0))
        .unwrap()
}

fn template(source: &str) -> ChatTemplate {
    let sources = vec![TemplateSource {
        name: DEFAULT_NAME.into(),
        text: source.into(),
        origin: Origin::File,
    }];
    ChatTemplate::from_sources("t.jinja".into(), source.into(), sources, Map::new(), now()).unwrap()
}

#[test]
fn tojson_matches_python_json_dumps() {
    let rendered = template("{{ tools | tojson }}|{{ tools[0] | tojson(indent=2) }}")
        .render(
            &[],
            Some(&[json!({"z": "é<>", "a": [1, 2.5], "e": {}})]),
            false,
        )
        .unwrap();
    assert_eq!(
        rendered,
        "[{\"z\": \"é<>\", \"a\": [1, 2.5], \"e\": {}}]|{\n  \"z\": \"é<>\",\n  \"a\": [\n    1,\n    2.5\n  ],\n  \"e\": {}\n}"
    );
}

#[test]
fn blocks_are_trimmed_like_transformers() {
    let source = "{% for m in messages %}\n  {% if m.role == 'user' %}\n<{{ m.content }}>\n  {% endif %}\n{% endfor %}\n";
    let rendered = template(source)
        .render(
            &[
                json!({"role": "user", "content": "a"}),
                json!({"role": "x", "content": "b"}),
            ],
            None,
            false,
        )
        .unwrap();
    assert_eq!(rendered, "<a>\n");
}

#[test]
fn strftime_now_reads_the_pinned_clock_and_exceptions_surface() {
    let rendered = template("{{ strftime_now('%d %b %Y') }}")
        .render::<Value>(&[], None, false)
        .unwrap();
    assert_eq!(rendered, "29 Nov 2026");
    let error = template("{{ raise_exception('no system role') }}")
        .render::<Value>(&[], None, false)
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("the template raised an exception at line 1"),
        "{error}"
    );
    assert!(error.to_string().contains("no system role"), "{error}");
}

#[test]
fn python_string_methods_work() {
    let rendered = template("{{ 'a,b'.split(',') | join('+') }}{{ ' x '.strip() }}{% if 'ab'.startswith('a') %}y{% endif %}")
        .render::<Value>(&[], None, false)
        .unwrap();
    assert_eq!(rendered, "a+bxy");
}

#[test]
fn lists_in_a_namespace_change_in_place_like_python_lists() {
    let source = "{%- set ns = namespace(ids=[], n=0) -%}\
        {%- for m in messages %}{% set _ = ns.ids.append(m.content) %}{% endfor -%}\
        {{ ns.ids | length }}{{ ns.ids | tojson }}{{ ns.ids[-1] }}\
        {%- set first = ns.ids.pop(0) %}|{{ first }}|{{ ns.ids | join(',') }}|{{ ns.ids | length }}\
        {%- set _ = ns.ids.insert(0, 'z') %}|{{ ns.ids[0] }}{% if ns.ids %}|full{% endif %}\
        {%- set _ = ns.ids.clear() %}{% if not ns.ids %}|empty{% endif %}";
    let template = template(source);
    assert!(!template.mutated_lists());
    let rendered = template
        .render(
            &[
                json!({"role": "user", "content": "a"}),
                json!({"role": "user", "content": "b"}),
                json!({"role": "user", "content": "c"}),
            ],
            None,
            false,
        )
        .unwrap();
    assert_eq!(rendered, "3[\"a\", \"b\", \"c\"]c|a|b,c|2|z|full|empty");
    assert!(template.mutated_lists());
}

#[test]
fn errors_name_the_undefined_variable_or_method_and_the_line() {
    let error = template("{{ 'a' }}\n{{- 'x' + missing_variable }}")
        .render::<Value>(&[], None, false)
        .unwrap_err()
        .to_string();
    assert!(error.contains("line 2"), "{error}");
    assert!(error.contains("`{{- 'x' + missing_variable }}`"), "{error}");
    assert!(error.contains("`missing_variable` is undefined"), "{error}");
    let error = template("{% set xs = [1] %}{{ xs.frobnicate(2) }}")
        .render::<Value>(&[], None, false)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("frobnicate") && error.contains("line 1"),
        "{error}"
    );
}

#[test]
fn placeholder_special_tokens_name_themselves() {
    let template = template("{{ bos_token + messages[0].content + eos_token }}")
        .with_placeholder_special_tokens();
    assert_eq!(template.placeholder_tokens(), ["bos_token", "eos_token"]);
    let rendered = template
        .render(&[json!({"role": "user", "content": "hi"})], None, false)
        .unwrap();
    assert_eq!(
        rendered,
        "<kvlint-placeholder:bos_token>hi<kvlint-placeholder:eos_token>"
    );
}

#[test]
fn sites_of_strftime_calls_and_variables() {
    let source = "{%- set day = strftime_now('%Y-%m-%d') -%}\n\
                  Today: {{ day }}. Now: {{ strftime_now('%H:%M') }}\n\
                  {{- 'Date: ' + date_string }}";
    let mut template = template(source);
    template
        .kwargs
        .insert("date_string".into(), json!("1 Jan 2030"));
    let messages: [Value; 0] = [];
    let first = template
        .site(&messages, None, SiteProbe::StrftimeCall(0))
        .unwrap();
    assert_eq!(first.expression, "strftime_now('%Y-%m-%d')");
    let span = first.span.unwrap();
    assert_eq!((span.line, span.column), (1, 15));
    let second = template
        .site(&messages, None, SiteProbe::StrftimeCall(1))
        .unwrap();
    assert_eq!(second.expression, "strftime_now('%H:%M')");
    assert_eq!(second.span.unwrap().line, 2);
    assert!(
        template
            .site(&messages, None, SiteProbe::StrftimeCall(2))
            .is_none()
    );
    let variable = template
        .site(&messages, None, SiteProbe::Variable("date_string"))
        .unwrap();
    assert!(variable.expression.contains("date_string"), "{variable:?}");
    assert_eq!(variable.span.unwrap().line, 3);
}

#[test]
fn a_missing_variable_is_named() {
    let template = template("{{ 'Functions: ' + functions }}");
    let messages: [Value; 0] = [];
    assert_eq!(
        template.missing_variable(&messages, None, true).as_deref(),
        Some("functions")
    );
}

#[test]
fn indent_and_tojson_behave_like_jinja2() {
    let rendered = template(
        "{{ '{\\n' | indent(4, first=true) }}|{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, blank=true) }}|{{ 'x' | indent('> ', true) }}",
    )
    .render::<Value>(&[], None, false)
    .unwrap();
    assert_eq!(rendered, "    {\n|a\n  b\n\n  c|a\n  b|> x");
    let error = template("{{ messages[0].content | tojson }}")
        .render(&[json!({"role": "user"})], None, false)
        .unwrap_err();
    assert!(
        error.to_string().contains("not JSON serializable"),
        "{error}"
    );
}

#[test]
fn the_site_of_tools() {
    let template = template("{%- if tools %}\n{{- 'Tools: ' + tools | tojson }}{% endif %}");
    let tools = [json!({"name": "f"})];
    let messages = [json!({"role": "user", "content": "x"})];
    let site = template.site(&messages, Some(&tools), SiteProbe::Variable("tools"));
    // The filter that fails on the tripwire: where the tools are written.
    let site = site.unwrap();
    assert_eq!(site.expression, "tojson");
    assert_eq!(site.span.map(|span| span.line), Some(2));
}

/// The message of a render that must fail.
fn render_error(source: &str) -> String {
    let conversation = [json!({"role": "user", "content": "hi"})];
    match template(source).render(&conversation, None, true) {
        Ok(text) => panic!("rendered {} bytes", text.len()),
        Err(error) => {
            let help = match &error {
                InputError::TemplateLimit { help, .. } => help.clone().unwrap_or_default(),
                _ => String::new(),
            };
            format!("{error} | {help}")
        }
    }
}

#[test]
fn hostile_templates_end_as_errors_naming_the_line() {
    // Work without end: a loop of loops.
    let error = render_error(
        "{% for m in messages %}{{ m.content }}{% endfor %}\n{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    );
    assert!(
        error.contains("more work than its limit allows at line 2"),
        "{error}"
    );
    assert!(error.contains("`fuel` in `[template-limits]`"), "{error}");
    // Memory without end: a string doubled in a loop.
    let error = render_error(
        "{% set ns = namespace(s='x') %}\n{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
    );
    assert!(
        error.contains("more work than its limit allows at line 2"),
        "{error}"
    );
    // kvlint's own filters pay before they make their text.
    let error = render_error("{{ messages | tojson(indent=1000000000) }}");
    assert!(
        error.contains("more work than its limit allows at line 1"),
        "{error}"
    );
    let error = render_error("{{ 'a\\nb\\nc' | indent(1000000000000) }}");
    assert!(
        error.contains("more work than its limit allows at line 1"),
        "{error}"
    );
    // Printed output far over the conversation's size.
    let error =
        render_error("{% for i in range(20000) %}\n{{ messages | tojson(indent=40) }}{% endfor %}");
    assert!(
        error.contains("printed more than") && error.contains("16× plus 1048576 bytes) at line 2"),
        "{error}"
    );
    // Nesting without end: a macro calling itself.
    let error = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}\n{{ f(0) }}");
    assert!(error.contains("recursion limit exceeded"), "{error}");
    assert!(
        error.contains("`recursion` in `[template-limits]`"),
        "{error}"
    );
}

#[test]
fn limits_are_configurable_and_generous_by_default() {
    let source = "{% for i in range(5000) %}{{ messages[0].content }}{% endfor %}";
    let conversation = [json!({"role": "user", "content": "x".repeat(1000)})];
    // 5 MB printed for a 1 kB conversation: over the default output cap, fine under a larger one.
    assert!(template(source).render(&conversation, None, false).is_err());
    let generous = TemplateLimits {
        output_per_input_byte: 10_000,
        ..TemplateLimits::default()
    };
    let rendered = template(source)
        .with_limits(generous)
        .render(&conversation, None, false)
        .unwrap();
    assert_eq!(rendered.len(), 5_000_000);
    let frugal = TemplateLimits {
        fuel: 100,
        ..TemplateLimits::default()
    };
    assert!(
        template("{% for i in range(1000) %}{% endfor %}")
            .with_limits(frugal)
            .render::<Value>(&[], None, false)
            .is_err()
    );
}
