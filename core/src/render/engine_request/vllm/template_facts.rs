//! What vLLM reads from the chat template itself before it parses a request: whether the
//! template iterates message content as parts (`vllm/renderers/hf.py`,
//! `_detect_content_format`), whether it knows the `developer` role
//! (`_detect_developer_role_support`), and which variables it reads
//! (`resolve_chat_template_kwargs` passes only those).
//!
//! vLLM walks the template's Jinja2 AST; this walks minijinja's AST of the same source,
//! node for node.

use std::collections::{BTreeSet, HashMap, HashSet};

use minijinja::machinery::ast::{CallArg, Expr, Macro, Stmt};
use minijinja::syntax::SyntaxConfig;

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

/// vLLM asserts that the target of a matching loop or assignment is a plain name; the
/// assertion error ends the search with the default.
struct UnexpectedTarget;

/// The nodes vLLM's search visits, in Jinja2's `find_all` order (depth first, document
/// order).
#[derive(Default)]
struct Nodes<'t, 'a> {
    /// `{% set %}` statements, as Jinja2's `Assign` nodes.
    assignments: Vec<(&'t Expr<'a>, &'t Expr<'a>)>,
    /// Loops and whether they sit inside a macro definition.
    loops: Vec<LoopNode<'t, 'a>>,
    macros: Vec<&'t Macro<'a>>,
    calls: Vec<(&'t Expr<'a>, &'t [CallArg<'a>])>,
}

struct LoopNode<'t, 'a> {
    target: &'t Expr<'a>,
    iter: &'t Expr<'a>,
    /// The macro around it, by index into `Nodes::macros`.
    in_macro: Option<usize>,
}

impl<'t, 'a> Nodes<'t, 'a> {
    fn collect_statements(&mut self, statements: &'t [Stmt<'a>], in_macro: Option<usize>) {
        for statement in statements {
            self.collect_statement(statement, in_macro);
        }
    }

    fn collect_statement(&mut self, statement: &'t Stmt<'a>, in_macro: Option<usize>) {
        match statement {
            Stmt::Template(template) => self.collect_statements(&template.children, in_macro),
            Stmt::EmitExpr(emit) => self.collect_expression(&emit.expr),
            Stmt::EmitRaw(_) | Stmt::Continue(_) | Stmt::Break(_) => {}
            Stmt::ForLoop(for_loop) => {
                self.loops.push(LoopNode {
                    target: &for_loop.target,
                    iter: &for_loop.iter,
                    in_macro,
                });
                self.collect_expression(&for_loop.target);
                self.collect_expression(&for_loop.iter);
                self.collect_statements(&for_loop.body, in_macro);
                self.collect_statements(&for_loop.else_body, in_macro);
                if let Some(filter) = &for_loop.filter_expr {
                    self.collect_expression(filter);
                }
            }
            Stmt::IfCond(condition) => {
                self.collect_expression(&condition.expr);
                self.collect_statements(&condition.true_body, in_macro);
                self.collect_statements(&condition.false_body, in_macro);
            }
            Stmt::WithBlock(with) => {
                for (target, value) in &with.assignments {
                    self.collect_expression(target);
                    self.collect_expression(value);
                }
                self.collect_statements(&with.body, in_macro);
            }
            Stmt::Set(set) => {
                self.assignments.push((&set.target, &set.expr));
                self.collect_expression(&set.target);
                self.collect_expression(&set.expr);
            }
            Stmt::SetBlock(set) => {
                self.collect_expression(&set.target);
                if let Some(filter) = &set.filter {
                    self.collect_expression(filter);
                }
                self.collect_statements(&set.body, in_macro);
            }
            Stmt::AutoEscape(block) => {
                self.collect_expression(&block.enabled);
                self.collect_statements(&block.body, in_macro);
            }
            Stmt::FilterBlock(block) => {
                self.collect_expression(&block.filter);
                self.collect_statements(&block.body, in_macro);
            }
            Stmt::Block(block) => self.collect_statements(&block.body, in_macro),
            Stmt::Import(import) => {
                self.collect_expression(&import.expr);
                self.collect_expression(&import.name);
            }
            Stmt::FromImport(import) => self.collect_expression(&import.expr),
            Stmt::Extends(extends) => self.collect_expression(&extends.name),
            Stmt::Include(include) => self.collect_expression(&include.name),
            Stmt::Macro(definition) => {
                let index = self.macros.len();
                self.macros.push(definition);
                for default in &definition.defaults {
                    self.collect_expression(default);
                }
                self.collect_statements(&definition.body, Some(index));
            }
            // Jinja2's `CallBlock` is no macro: loops in its body count as outside macros.
            Stmt::CallBlock(block) => {
                self.collect_call(&block.call.expr, &block.call.args);
                self.collect_statements(&block.macro_decl.body, in_macro);
            }
            Stmt::Do(statement) => self.collect_call(&statement.call.expr, &statement.call.args),
        }
    }

    fn collect_call(&mut self, callee: &'t Expr<'a>, args: &'t [CallArg<'a>]) {
        self.calls.push((callee, args));
        self.collect_expression(callee);
        self.collect_args(args);
    }

    /// Expressions hold no loops or assignments, only calls (to macros that take content).
    fn collect_expression(&mut self, expression: &'t Expr<'a>) {
        match expression {
            Expr::Var(_) | Expr::Const(_) => {}
            Expr::Slice(slice) => {
                self.collect_expression(&slice.expr);
                for bound in [&slice.start, &slice.stop, &slice.step]
                    .into_iter()
                    .flatten()
                {
                    self.collect_expression(bound);
                }
            }
            Expr::UnaryOp(op) => self.collect_expression(&op.expr),
            Expr::BinOp(op) => {
                self.collect_expression(&op.left);
                self.collect_expression(&op.right);
            }
            Expr::Compare(compare) => {
                self.collect_expression(&compare.expr);
                for op in &compare.ops {
                    self.collect_expression(&op.expr);
                }
            }
            Expr::IfExpr(branch) => {
                self.collect_expression(&branch.test_expr);
                self.collect_expression(&branch.true_expr);
                if let Some(otherwise) = &branch.false_expr {
                    self.collect_expression(otherwise);
                }
            }
            Expr::Filter(filter) => {
                if let Some(value) = &filter.expr {
                    self.collect_expression(value);
                }
                self.collect_args(&filter.args);
            }
            Expr::Test(test) => {
                self.collect_expression(&test.expr);
                self.collect_args(&test.args);
            }
            Expr::GetAttr(access) => self.collect_expression(&access.expr),
            Expr::GetItem(access) => {
                self.collect_expression(&access.expr);
                self.collect_expression(&access.subscript_expr);
            }
            Expr::Call(call) => self.collect_call(&call.expr, &call.args),
            Expr::List(list) => list
                .items
                .iter()
                .for_each(|item| self.collect_expression(item)),
            Expr::Tuple(tuple) => tuple
                .items
                .iter()
                .for_each(|item| self.collect_expression(item)),
            Expr::Map(map) => {
                for (key, value) in map.keys.iter().zip(&map.values) {
                    self.collect_expression(key);
                    self.collect_expression(value);
                }
            }
        }
    }

    fn collect_args(&mut self, args: &'t [CallArg<'a>]) {
        for arg in args {
            match arg {
                CallArg::Pos(value)
                | CallArg::Kwarg(_, value)
                | CallArg::PosSplat(value)
                | CallArg::KwargSplat(value) => self.collect_expression(value),
            }
        }
    }
}

fn variable_name<'a>(expression: &Expr<'a>) -> Option<&'a str> {
    match expression {
        Expr::Var(var) => Some(var.id),
        _ => None,
    }
}

/// `_is_var_or_elems_access`: `name`, `name.key` or `name['key']`, seen through filters,
/// tests and slices.
fn is_var_or_elems_access(expression: &Expr<'_>, name: &str, key: Option<&str>) -> bool {
    match expression {
        Expr::Filter(filter) => filter
            .expr
            .as_ref()
            .is_some_and(|inner| is_var_or_elems_access(inner, name, key)),
        Expr::Test(test) => is_var_or_elems_access(&test.expr, name, key),
        Expr::Slice(slice) => is_var_or_elems_access(&slice.expr, name, key),
        _ => match key {
            None => variable_name(expression) == Some(name),
            Some(key) => match expression {
                Expr::GetAttr(access) => {
                    variable_name(&access.expr) == Some(name) && access.name == key
                }
                Expr::GetItem(access) => {
                    variable_name(&access.expr) == Some(name)
                        && matches!(&access.subscript_expr, Expr::Const(constant)
                            if constant.value.as_str() == Some(key))
                }
                _ => false,
            },
        },
    }
}

/// `_iter_nodes_assign_var_or_elems(root, "messages")`: `messages` and every name assigned
/// from it (or from a name assigned from it), breadth first.
fn message_list_names<'a>(nodes: &Nodes<'_, 'a>) -> Result<Vec<&'a str>, UnexpectedTarget> {
    let mut names = vec!["messages"];
    let mut queue = std::collections::VecDeque::from(["messages"]);
    while let Some(related) = queue.pop_front() {
        for (target, value) in &nodes.assignments {
            if is_var_or_elems_access(value, related, None) {
                let name = variable_name(target).ok_or(UnexpectedTarget)?;
                names.push(name);
                if name != related {
                    queue.push_back(name);
                }
            }
        }
    }
    Ok(names)
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
