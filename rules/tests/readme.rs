//! The README's rule table lists every rule of the registry, with its code and summary.

#[test]
fn readme_rule_table_matches_the_registry() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .unwrap_or_default();
    let rows: Vec<&str> = readme
        .lines()
        .filter(|line| line.starts_with("| KV"))
        .collect();
    let mut rules: Vec<_> = kvlint_rules::RULES.to_vec();
    rules.sort_by_key(|rule| rule.meta().code);
    let expected: Vec<String> = rules
        .iter()
        .map(|rule| {
            let meta = rule.meta();
            format!("| {} | `{}` | {} |", meta.code, meta.name, meta.summary)
        })
        .collect();
    assert_eq!(rows, expected, "update the rule table in README.md");
}
