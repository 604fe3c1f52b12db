//! `kvlint rule [NAME]`: a rule's documentation, or the rule list.

use super::Outcome;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A rule name (`volatile-timestamp`) or code (`KV101`).
    pub name: Option<String>,
}

pub fn run(args: Args) -> miette::Result<Outcome> {
    let Some(name) = args.name else {
        let mut rules = kvlint_rules::RULES.to_vec();
        rules.sort_by_key(|rule| rule.meta().code);
        let listing = rules
            .iter()
            .map(|rule| {
                let meta = rule.meta();
                format!("{}  {:<20} {}\n", meta.code, meta.name, meta.summary)
            })
            .collect();
        return Ok(Outcome {
            output: listing,
            exit_code: 0,
        });
    };
    let rule = kvlint_rules::rule(&name).ok_or_else(|| {
        let names: Vec<&str> = kvlint_rules::RULES
            .iter()
            .map(|rule| rule.meta().name)
            .collect();
        miette::miette!(
            help = format!("known rules: {}", names.join(", ")),
            "unknown rule `{name}`"
        )
    })?;
    let meta = rule.meta();
    Ok(Outcome {
        output: format!(
            "# {} ({})\n\n{}.\n\n{}",
            meta.name,
            meta.code,
            meta.summary,
            meta.documentation()
        ),
        exit_code: 0,
    })
}
