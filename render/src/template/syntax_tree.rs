//! What a Jinja template does, read from minijinja's syntax tree: the loops, assignments,
//! macros, calls, names and keys it holds, collected in Jinja2's `find_all` order (vLLM's and
//! SGLang's template facts search them as those engines search Jinja2's tree), and whether a
//! template is a model's chat template.

use minijinja::machinery::ast::{CallArg, Expr, Macro, Stmt};
use minijinja::syntax::SyntaxConfig;

use super::render_error::SPECIAL_TOKENS;
use super::without_generation_blocks;

/// Whether Jinja source is a model's chat template rather than an application prompt
/// template, judged by what it does, not by the words its text holds: it loops over
/// `messages` (or a list assigned from it), reads a message's `role` (`messages[0].role`,
/// `messages[-1]['role']`), or reads `add_generation_prompt` or a special token
/// (`bos_token`, `eos_token`), which only transformers' chat rendering passes. Source that does
/// not parse counts as a chat template, so that its syntax error is reported with its place.
pub fn is_chat_template(source: &str) -> bool {
    let source = without_generation_blocks(source);
    let Ok(root) = minijinja::machinery::parse(&source, "<template>", SyntaxConfig::default())
    else {
        return true;
    };
    let mut nodes = Nodes::default();
    nodes.collect_statement(&root, None);
    let lists = message_list_names(&nodes).unwrap_or_else(|UnexpectedTarget| vec!["messages"]);
    let is_message_list = |expression: &Expr<'_>| {
        lists
            .iter()
            .any(|list| is_var_or_elems_access(expression, list, None))
    };
    let loops_over_messages = nodes.loops.iter().any(|node| is_message_list(node.iter));
    let reads_a_role = nodes.key_reads.iter().any(|(object, key)| {
        *key == "role"
            && match object {
                Expr::GetItem(item) => is_message_list(&item.expr),
                Expr::Filter(_) => is_message_list(object),
                _ => false,
            }
    });
    let reads_chat_variables = nodes
        .names
        .iter()
        .any(|name| *name == "add_generation_prompt" || SPECIAL_TOKENS.contains(name));
    loops_over_messages || reads_a_role || reads_chat_variables
}

/// vLLM asserts that the target of a matching loop or assignment is a plain name; the
/// assertion error ends the search with the default.
pub(crate) struct UnexpectedTarget;

/// The nodes vLLM's search visits, in Jinja2's `find_all` order (depth first, document
/// order).
#[derive(Default)]
pub(crate) struct Nodes<'t, 'a> {
    /// `{% set %}` statements, as Jinja2's `Assign` nodes.
    pub(crate) assignments: Vec<(&'t Expr<'a>, &'t Expr<'a>)>,
    /// Loops and whether they sit inside a macro definition.
    pub(crate) loops: Vec<LoopNode<'t, 'a>>,
    pub(crate) macros: Vec<&'t Macro<'a>>,
    pub(crate) calls: Vec<(&'t Expr<'a>, &'t [CallArg<'a>])>,
    /// Names read (`Name` nodes in Jinja2's tree), assigned or not.
    pub(crate) names: Vec<&'a str>,
    /// `object.key` and `object['key']`: the object and the key.
    pub(crate) key_reads: Vec<(&'t Expr<'a>, &'t str)>,
}

pub(crate) struct LoopNode<'t, 'a> {
    pub(crate) target: &'t Expr<'a>,
    pub(crate) iter: &'t Expr<'a>,
    /// The macro around it, by index into `Nodes::macros`.
    pub(crate) in_macro: Option<usize>,
}

impl<'t, 'a> Nodes<'t, 'a> {
    fn collect_statements(&mut self, statements: &'t [Stmt<'a>], in_macro: Option<usize>) {
        for statement in statements {
            self.collect_statement(statement, in_macro);
        }
    }

    pub(crate) fn collect_statement(&mut self, statement: &'t Stmt<'a>, in_macro: Option<usize>) {
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
            Expr::Var(var) => self.names.push(var.id),
            Expr::Const(_) => {}
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
            Expr::GetAttr(access) => {
                self.key_reads.push((&access.expr, access.name));
                self.collect_expression(&access.expr);
            }
            Expr::GetItem(access) => {
                if let Expr::Const(constant) = &access.subscript_expr
                    && let Some(key) = constant.value.as_str()
                {
                    self.key_reads.push((&access.expr, key));
                }
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

pub(crate) fn variable_name<'a>(expression: &Expr<'a>) -> Option<&'a str> {
    match expression {
        Expr::Var(var) => Some(var.id),
        _ => None,
    }
}

/// `_is_var_or_elems_access`: `name`, `name.key` or `name['key']`, seen through filters,
/// tests and slices.
pub(crate) fn is_var_or_elems_access(expression: &Expr<'_>, name: &str, key: Option<&str>) -> bool {
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
pub(crate) fn message_list_names<'a>(
    nodes: &Nodes<'_, 'a>,
) -> Result<Vec<&'a str>, UnexpectedTarget> {
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

#[cfg(test)]
mod tests {
    use super::is_chat_template;

    #[test]
    fn a_chat_template_is_told_by_what_it_does() {
        for source in [
            "{% for message in messages %}{{ message.content }}{% endfor %}",
            "{% set loop_messages = messages[1:] %}{% for m in loop_messages %}{{ m['content'] }}{% endfor %}",
            "{% for m in messages | selectattr('content') %}{{ m.content }}{% endfor %}",
            "{% if messages[0]['role'] == 'system' %}{{ messages[0].content }}{% endif %}",
            "{{ (messages | last).role }}",
            "{{ bos_token }}{{ messages[0].content }}",
            "{% if add_generation_prompt %}<|assistant|>{% endif %}",
            // Not Jinja at all: read as a chat template, whose error names the line.
            "{% for message in messages %}",
        ] {
            assert!(is_chat_template(source), "{source}");
        }
    }

    #[test]
    fn messages_roles_and_tokens_in_prose_or_other_names_are_no_chat_template() {
        for source in [
            "Request {{ request_id }}. Read the messages; each has a role. <|im_start|> frames a message.",
            "This conversation holds {{ messages | length }} messages; the last from {{ last_message.role }}.",
            "{% for note in notes %}{{ note.role }}: {{ note.text }}{% endfor %}",
            "{{ message.role }} wrote {{ message.content }}",
            "{# for message in messages: add_generation_prompt, bos_token #}{{ question }}",
            "{% raw %}{% for message in messages %}{{ message.role }}{% endfor %}{% endraw %}",
        ] {
            assert!(!is_chat_template(source), "{source}");
        }
    }
}
