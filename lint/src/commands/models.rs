//! `kvlint models [MODEL]`: the hosted APIs' caching figures kvlint predicts and prices with,
//! each row with the page it was read from, a quote of it and the date.

use std::fmt::Write as _;

use kvlint_core::cache::{MODELS, ModelFigures};
use kvlint_protocol::EngineName;

use super::Outcome;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A model as a request names it (`claude-opus-5-5-20260922`): the row that applies to it.
    /// Without it, every row.
    pub model: Option<String>,
    /// Only this provider's rows: openai, anthropic, gemini, deepseek, xai.
    #[arg(long)]
    pub provider: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Format {
    Human,
    Json,
}

pub fn run(args: Args) -> miette::Result<Outcome> {
    let hosted = EngineName::ALL
        .into_iter()
        .filter(|engine| !engine.is_self_hosted())
        .map(EngineName::as_str);
    let providers: Vec<&str> = match &args.provider {
        Some(provider) => vec![provider.as_str()],
        None => hosted.clone().collect(),
    };
    let rows: Vec<&ModelFigures> = match &args.model {
        Some(model) => {
            let found: Vec<&ModelFigures> = providers
                .iter()
                .filter_map(|provider| MODELS.lookup(provider, model))
                .collect();
            // A provider's own row for the model, else the fallbacks that would apply.
            let named: Vec<&ModelFigures> = found
                .iter()
                .copied()
                .filter(|row| !row.name.is_empty())
                .collect();
            if named.is_empty() { found } else { named }
        }
        None => MODELS
            .models
            .iter()
            .filter(|row| providers.contains(&row.provider.as_str()))
            .collect(),
    };
    if rows.is_empty() {
        let known = hosted.collect::<Vec<_>>().join(", ");
        return Err(miette::miette!(
            help = format!("the providers in the table: {known}"),
            "no row of the model table applies{}{}",
            args.model
                .as_ref()
                .map_or(String::new(), |model| format!(" to `{model}`")),
            args.provider
                .as_ref()
                .map_or(String::new(), |provider| format!(
                    " for provider `{provider}`"
                )),
        ));
    }
    let output = match args.format {
        Format::Json => {
            let table = serde_json::json!({"as_of": MODELS.as_of, "models": rows});
            format!("{table:#}\n")
        }
        Format::Human => human(&rows),
    };
    Ok(Outcome {
        output,
        exit_code: 0,
    })
}

/// Each row: its figures on one line, then where they come from.
fn human(rows: &[&ModelFigures]) -> String {
    let mut out = format!(
        "model figures as of {} (USD per million tokens; `verified`: every figure seen on the provider's own page)\n",
        MODELS.as_of
    );
    for row in rows {
        let name = match row.name.as_str() {
            "" => "(any other model)",
            name => name,
        };
        let _ = writeln!(
            out,
            "\n{} {name}: caches from {} tokens; input ${}, cached ${}, cache write ${}{}{}",
            row.provider,
            row.min_cacheable_tokens,
            row.input,
            row.cached_input,
            row.cache_write,
            if row.breakpoints {
                "; cache breakpoints"
            } else {
                ""
            },
            if row.verified { "; verified" } else { "" },
        );
        let _ = writeln!(out, "  source: {} (checked {})", row.source, row.checked);
        let _ = writeln!(out, "  quote: {}", row.quote);
        if let Some(disagreement) = &row.disagreement {
            let _ = writeln!(out, "  where sources disagree: {disagreement}");
        }
    }
    out
}
