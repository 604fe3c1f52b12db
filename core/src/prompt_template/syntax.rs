//! Whether an application prompt template is well formed, before its placeholders are read:
//! Mustache sections and Handlebars blocks closed in order, every `{{` closed, and front
//! matter valid YAML. A template that is not would fail where it is rendered; its placeholders
//! cannot be placed.

use kvlint_request::error::InputError;
use kvlint_request::excerpt::Excerpt;
use kvlint_request::locate::LineColumn;

/// Checks the syntax of the template at `path` that its extension names: block balance for
/// Mustache, Handlebars and Dotprompt bodies; YAML for front matter, which Dotprompt, Prompty
/// and `.prompt` files must close.
pub fn check_template_syntax(path: &str, text: &str) -> Result<(), InputError> {
    let extension = path.rsplit('.').next().unwrap_or_default();
    let error = |offset: usize, len: usize, message: String, help: Option<String>| {
        let position = LineColumn::of_offset(text, offset);
        let source_code = Excerpt::around(path, text, offset, len);
        InputError::TemplateSyntax {
            path: path.to_owned(),
            line: position.line,
            column: position.column,
            span: source_code.clip(offset, len),
            source_code,
            message,
            help,
        }
    };
    // Any prompt template may open with front matter (its body is read after it); in the
    // formats made of front matter and a body, a `---` opening none is an error too.
    let requires_closing = matches!(extension, "dotprompt" | "prompty" | "prompt");
    let body_start = front_matter_end(text, requires_closing)
        .map_err(|(offset, message)| error(offset, 3, message, None))?;
    if matches!(extension, "mustache" | "hbs" | "handlebars" | "dotprompt") {
        blocks_balance(&text[body_start..]).map_err(|problem| {
            error(
                body_start + problem.offset,
                problem.len,
                problem.message,
                problem.help,
            )
        })?;
    }
    Ok(())
}

/// Where the body starts after valid front matter (`---` … `---`), or where and why it is
/// not valid. A `---` line never closed is no front matter unless `requires_closing`.
fn front_matter_end(text: &str, requires_closing: bool) -> Result<usize, (usize, String)> {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Ok(0);
    };
    let start = text.len() - rest.len();
    let mut offset = start;
    let end = rest.split_inclusive('\n').find_map(|line| {
        let found = (line.trim_end() == "---").then_some((offset, offset + line.len()));
        offset += line.len();
        found
    });
    let Some((yaml_end, body_start)) = end else {
        if !requires_closing {
            return Ok(0);
        }
        return Err((
            0,
            "the front matter opened by `---` is never closed by a `---` line".into(),
        ));
    };
    let yaml = &text[start..yaml_end];
    for event in saphyr_parser::Parser::new_from_str(yaml) {
        if let Err(problem) = event {
            let at = yaml
                .char_indices()
                .nth(problem.marker().index())
                .map_or(yaml.len(), |(at, _)| at);
            return Err((
                start + at,
                format!("invalid YAML in the front matter: {}", problem.info()),
            ));
        }
    }
    Ok(body_start)
}

/// A Mustache or Handlebars body that does not balance.
#[derive(Debug)]
struct Unbalanced {
    offset: usize,
    len: usize,
    message: String,
    help: Option<String>,
}

/// Checks that every `{{` is closed and every section or block (`{{#name}}`, `{{^name}}`)
/// is closed by its own `{{/name}}`, in order.
fn blocks_balance(body: &str) -> Result<(), Unbalanced> {
    // Open blocks: name, and the offset and length of the tag that opened them.
    let mut open: Vec<(&str, usize, usize)> = Vec::new();
    let mut cursor = 0;
    while let Some(found) = body[cursor..].find("{{") {
        let start = cursor + found;
        let after = &body[start..];
        let closer = if after.starts_with("{{{") {
            "}}}"
        } else if after.starts_with("{{!--") {
            "--}}"
        } else {
            "}}"
        };
        let Some(close) = after[2..].find(closer).map(|at| 2 + at + closer.len()) else {
            return Err(Unbalanced {
                offset: start,
                len: 2,
                message: format!("`{{{{` is never closed by `{closer}`"),
                help: None,
            });
        };
        let tag = &after[..close];
        cursor = start + close;
        let inner = tag
            .trim_start_matches('{')
            .trim_end_matches('}')
            .trim_matches('~')
            .trim();
        // `{{=<% %>=}}` sets other delimiters: what follows is not read with these.
        if inner.starts_with('=') {
            return Ok(());
        }
        let name_of = |rest: &'_ str| -> String {
            rest.trim_start_matches('*')
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned()
        };
        if let Some(rest) = inner.strip_prefix('#').or_else(|| {
            // `{{^}}` alone is Handlebars' `else`; `{{^name}}` an inverted section.
            inner
                .strip_prefix('^')
                .filter(|rest| !rest.trim().is_empty())
        }) {
            let name = name_of(rest);
            let name_start = rest.trim_start_matches('*').trim_start();
            let name = &name_start[..name.len()];
            open.push((name, start, tag.len()));
        } else if let Some(rest) = inner.strip_prefix('/') {
            let name = name_of(rest);
            match open.pop() {
                Some((opened, _, _)) if opened == name => {}
                Some((opened, at, _)) => {
                    let position = LineColumn::of_offset(body, at);
                    return Err(Unbalanced {
                        offset: start,
                        len: tag.len(),
                        message: format!(
                            "`{{{{/{name}}}}}` closes `{opened}`, opened at line {}, column {}",
                            position.line, position.column
                        ),
                        help: Some(format!("close `{opened}` with `{{{{/{opened}}}}}` first")),
                    });
                }
                None => {
                    return Err(Unbalanced {
                        offset: start,
                        len: tag.len(),
                        message: format!("`{{{{/{name}}}}}` closes no open section or block"),
                        help: None,
                    });
                }
            }
        }
    }
    match open.pop() {
        Some((name, at, len)) => Err(Unbalanced {
            offset: at,
            len,
            message: format!("`{name}` is never closed"),
            help: Some(format!("close it with `{{{{/{name}}}}}`")),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(path: &str, text: &str) -> Option<String> {
        check_template_syntax(path, text)
            .err()
            .map(|error| error.to_string())
    }

    #[test]
    fn balanced_templates_pass() {
        for (path, text) in [
            (
                "a.mustache",
                "{{#items}}- {{name}}\n{{/items}}{{^items}}none{{/items}}{{! note }}",
            ),
            (
                "a.hbs",
                "{{#if user}}Hi {{user}}{{else}}Hi{{/if}} {{{raw}}} {{!-- {{#x}} --}}",
            ),
            (
                "a.hbs",
                "{{~#each items as |item|~}}{{item}}{{~/each~}}{{^}}",
            ),
            (
                "a.dotprompt",
                "---\nmodel: gemini\ninput:\n  schema:\n    now: string\n---\n{{#each docs}}{{this}}{{/each}}",
            ),
            (
                "a.prompty",
                "---\nname: x\n---\n{% for m in messages %}{{ m }}{% endfor %}",
            ),
            ("a.mustache", "{{=<% %>=}}<%#a%>"),
            // A `---` rule opening a Jinja or Markdown prompt, never closed: text.
            ("a.j2", "---\nHi {{ name }}"),
        ] {
            assert_eq!(problem(path, text), None, "{path}: {text}");
        }
    }

    #[test]
    fn unbalanced_blocks_and_bad_front_matter_are_placed() {
        let cases = [
            (
                "a.mustache",
                "Hi\n{{#items}}- {{name}}\n",
                "a.mustache:2:1: `items` is never closed",
            ),
            (
                "a.hbs",
                "{{#if a}}{{#each b}}{{/if}}",
                "a.hbs:1:21: `{{/if}}` closes `each`, opened at line 1, column 10",
            ),
            (
                "a.hbs",
                "ok {{/if}}",
                "a.hbs:1:4: `{{/if}}` closes no open section or block",
            ),
            (
                "a.hbs",
                "Hi {{name",
                "a.hbs:1:4: `{{` is never closed by `}}`",
            ),
            (
                "a.dotprompt",
                "---\nmodel: [a, b\n---\nHi",
                "a.dotprompt:3:1: invalid YAML in the front matter",
            ),
            (
                "a.prompty",
                "---\nname: x\nHi",
                "a.prompty:1:1: the front matter opened by `---` is never closed",
            ),
            (
                "a.j2",
                "---\nmodel: [a, b\n---\nAt {{ now }} answer.",
                "a.j2:3:1: invalid YAML in the front matter",
            ),
            (
                "a.prompt",
                "---\nname: x\nHi {now}",
                "a.prompt:1:1: the front matter opened by `---` is never closed",
            ),
            (
                "a.dotprompt",
                "---\nmodel: x\n---\n{{#each docs}}",
                "a.dotprompt:4:1: `each` is never closed",
            ),
        ];
        for (path, text, expected) in cases {
            let found = problem(path, text).unwrap_or_default();
            assert!(
                found.starts_with(expected),
                "{path}: {found:?}, expected {expected:?}"
            );
        }
    }
}
