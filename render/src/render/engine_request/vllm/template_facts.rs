//! What vLLM reads from the chat template itself before it parses a request: whether the
//! template iterates message content as parts (`vllm/renderers/hf.py`,
//! `_detect_content_format`), whether it knows the `developer` role
//! (`_detect_developer_role_support`), and which variables it reads
//! (`resolve_chat_template_kwargs` passes only those).
//!
//! vLLM walks the template's Jinja2 AST; this walks minijinja's AST of the same source,
//! node for node.

use std::collections::{BTreeSet, HashMap, HashSet};

use minijinja::machinery::ast::{CallArg, Expr};
use minijinja::syntax::SyntaxConfig;

use crate::template::syntax_tree::{
    Nodes, UnexpectedTarget, is_var_or_elems_access, message_list_names, variable_name,
};
use crate::template::without_generation_blocks;

/// How vLLM hands message content to a template (`ChatTemplateContentFormat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentFormat {
    /// Content as one string, its text parts joined by newlines.
    String,
    /// Content as a list of parts (`{"type": "text", "text": …}`), as OpenAI sends it.
    OpenAi,
}

/// The facts vLLM derives from one chat template's source.
#[derive(Clone, Debug)]
pub struct TemplateFacts {
    pub content_format: ContentFormat,
    /// The source names the `developer` role in quotes; otherwise developer messages become
    /// system messages.
    pub has_developer_role: bool,
    /// The variables the template reads from its context.
    pub variables: BTreeSet<String>,
}

impl TemplateFacts {
    pub fn of(source: &str) -> Self {
        let source = without_generation_blocks(source);
        Self {
            content_format: detect_content_format(&source),
            has_developer_role: source.contains("\"developer\"") || source.contains("'developer'"),
            variables: read_variables(&source),
        }
    }
}

fn read_variables(source: &str) -> BTreeSet<String> {
    let mut environment = minijinja::Environment::new();
    environment.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    environment
        .template_from_str(source)
        .map(|template| template.undeclared_variables(false).into_iter().collect())
        .unwrap_or_default()
}

/// `_detect_content_format`: "openai" when some loop iterates a message's content, "string"
/// otherwise, and "string" (vLLM's default) when the template cannot be parsed or the search
/// fails, as vLLM's does on a non-name loop or assignment target.
/// Whether some loop iterates the `content` of a variable named in `names`, directly or
/// through filters, tests and slices: SGLang's `detect_jinja_template_content_format`, which
/// adapts vLLM's search without following assignments. `None` when the template does not
/// parse.
pub(in crate::render::engine_request) fn loops_over_content(
    source: &str,
    names: &[&str],
) -> Option<bool> {
    let source = without_generation_blocks(source);
    let root = minijinja::machinery::parse(&source, "<template>", SyntaxConfig::default()).ok()?;
    let mut nodes = Nodes::default();
    nodes.collect_statement(&root, None);
    Some(nodes.loops.iter().any(|node| {
        names
            .iter()
            .any(|name| is_var_or_elems_access(node.iter, name, Some("content")))
    }))
}

fn detect_content_format(source: &str) -> ContentFormat {
    let Ok(root) = minijinja::machinery::parse(source, "<template>", SyntaxConfig::default())
    else {
        return ContentFormat::String;
    };
    let mut nodes = Nodes::default();
    nodes.collect_statement(&root, None);
    match first_content_loop(&nodes) {
        Ok(true) => ContentFormat::OpenAi,
        Ok(false) | Err(UnexpectedTarget) => ContentFormat::String,
    }
}

/// `_iter_nodes_assign_messages_item`: the names loops bind each message to.
fn message_names<'a>(nodes: &Nodes<'_, 'a>) -> Result<Vec<&'a str>, UnexpectedTarget> {
    let lists = message_list_names(nodes)?;
    let mut names = Vec::new();
    for node in &nodes.loops {
        if lists
            .iter()
            .any(|list| is_var_or_elems_access(node.iter, list, None))
        {
            names.push(variable_name(node.target).ok_or(UnexpectedTarget)?);
        }
    }
    Ok(names)
}

/// `_iter_nodes_assign_content_item`: whether a loop iterates a message's content, directly,
/// through a macro parameter that receives it, or as a variable named `content` outside any
/// macro.
fn first_content_loop(nodes: &Nodes<'_, '_>) -> Result<bool, UnexpectedTarget> {
    let messages = message_names(nodes)?;
    let takes_content = |value: &Expr<'_>| {
        messages
            .iter()
            .any(|name| is_var_or_elems_access(value, name, Some("content")))
    };
    let mut content_parameters: HashMap<usize, HashSet<&str>> = HashMap::new();
    for (index, definition) in nodes.macros.iter().enumerate() {
        let parameters: Vec<&str> = definition.args.iter().filter_map(variable_name).collect();
        for (callee, args) in &nodes.calls {
            if variable_name(callee) != Some(definition.name) {
                continue;
            }
            let positional = args.iter().filter_map(|arg| match arg {
                CallArg::Pos(value) => Some(value),
                _ => None,
            });
            for (parameter, value) in parameters.iter().zip(positional) {
                if takes_content(value) {
                    content_parameters
                        .entry(index)
                        .or_default()
                        .insert(parameter);
                }
            }
            for arg in args.iter() {
                if let CallArg::Kwarg(key, value) = arg
                    && parameters.contains(key)
                    && takes_content(value)
                {
                    content_parameters.entry(index).or_default().insert(key);
                }
            }
        }
    }
    for node in &nodes.loops {
        let iterates_content = takes_content(node.iter)
            || match node.in_macro {
                Some(index) => content_parameters.get(&index).is_some_and(|parameters| {
                    variable_name(node.iter).is_some_and(|name| parameters.contains(name))
                }),
                None => variable_name(node.iter) == Some("content"),
            };
        if iterates_content {
            return variable_name(node.target)
                .map(|_| true)
                .ok_or(UnexpectedTarget);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format(source: &str) -> ContentFormat {
        TemplateFacts::of(source).content_format
    }

    #[test]
    fn content_loops_make_the_openai_format() {
        assert_eq!(
            format("{% for m in messages %}{{ m.content }}{% endfor %}"),
            ContentFormat::String
        );
        assert_eq!(
            format(
                "{% for m in messages %}{% for p in m['content'] %}{{ p.text }}{% endfor %}{% endfor %}"
            ),
            ContentFormat::OpenAi
        );
        assert_eq!(
            format(
                "{% set msgs = messages[1:] %}{% for m in msgs %}{% for p in m.content | selectattr('type') %}{% endfor %}{% endfor %}"
            ),
            ContentFormat::OpenAi
        );
        // Through a macro parameter, and a loop over a variable named content.
        assert_eq!(
            format(
                "{% macro show(c) %}{% for p in c %}{{ p }}{% endfor %}{% endmacro %}{% for m in messages %}{{ show(m.content) }}{% endfor %}"
            ),
            ContentFormat::OpenAi
        );
        assert_eq!(
            format(
                "{% for m in messages %}{% set content = m.content %}{% for p in content %}{% endfor %}{% endfor %}"
            ),
            ContentFormat::OpenAi
        );
        // A tuple target where vLLM asserts a name: its default.
        assert_eq!(
            format("{% for m in messages %}{% for i, p in m.content %}{% endfor %}{% endfor %}"),
            ContentFormat::String
        );
    }

    #[test]
    fn the_developer_role_is_found_in_quotes() {
        assert!(TemplateFacts::of("{% if m.role == 'developer' %}{% endif %}").has_developer_role);
        assert!(!TemplateFacts::of("{{ developer }}").has_developer_role);
    }
}
