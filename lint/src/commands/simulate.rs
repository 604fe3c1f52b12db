//! `kvlint simulate SESSIONS…`: the workload replayed through N replicas whose caches are
//! modelled on their engine, for each routing policy, replica count and cache size asked: what
//! is served from cache, what is lost to locality and to eviction, how the load spreads, and
//! the time to first token. The trace is `kvlint workload`'s (kept on disk), so a sweep costs
//! only the simulation.

use std::path::PathBuf;

use kvlint_workload::html::simulation_html;
use kvlint_workload::{Arrival, CacheSize, Policies, Setup, SimEngine, SimulationResult, simulate};
use miette::IntoDiagnostic;
use rayon::prelude::*;

use super::Outcome;
use super::workload::{TraceArgs, deliver, traced};

#[derive(Debug, clap::Args)]
#[command(after_help = "Example:
  kvlint simulate sessions/ --replicas 4 --cache 20000 --engine vllm:block=16 \\
      --routing round-robin,session-hash,prefix-aware,ideal --arrival poisson:2 --prefill-tps 8000
  kvlint simulate sessions/ --replicas 2,4 --cache 5000,20000,unbounded --prefill-tps 8000 \\
      --format html -o fleet.html")]
pub struct Args {
    /// Session files, recordings or folders: anything `kvlint check` reads.
    pub sessions: Vec<PathBuf>,
    /// Benchmark datasets, as `kvlint workload --dataset` reads them.
    #[arg(long, value_name = "FILE")]
    pub dataset: Vec<PathBuf>,
    /// Replicas (several, comma-separated, for a sweep).
    #[arg(long, value_delimiter = ',', default_value = "2", value_name = "N")]
    pub replicas: Vec<usize>,
    /// Each replica's cache: blocks (`4096`), tokens (`65536tokens`) or `unbounded`; for
    /// llama.cpp, its host prompt cache (`0`: none). Several, comma-separated, for a sweep.
    #[arg(long, value_delimiter = ',', required = true, value_name = "SIZE")]
    pub cache: Vec<CacheSize>,
    /// The engine each replica's cache is modelled on: vllm[:block=16], sglang[:page=1],
    /// llamacpp[:slots=1].
    #[arg(long, default_value = "vllm", value_name = "ENGINE")]
    pub engine: SimEngine,
    /// Routing policies, comma-separated, each with its knobs after a colon: round-robin,
    /// random, least-loaded, session-hash, prefix-aware[:overload=SECONDS], ideal,
    /// power-of-two, sglang-cache-aware[:threshold=0.3,abs=64,rel=1.5,index=text|tokens,
    /// evict=60,size=67108864], dynamo-kv[:scale=1,credit=1,temperature=0,busy=FRACTION,ttl=SECONDS],
    /// dynamo-lmetric[:credit=1,temperature=0,busy=FRACTION,ttl=SECONDS],
    /// llmd-prefix[:weights=3/2/2,chars=64,blocks=256,lru=31250],
    /// llmd-precise[:weights=3/2/2],
    /// aibrix-prefix[:chars=4,entries=200000,ttl=1200,factor=2,gap=8,sigma=1],
    /// ray-prefix[:imbalance=10,match=0.1,evict=CHARS,target=CHARS,interval=10].
    #[arg(
        long,
        default_value = "round-robin,session-hash,prefix-aware,ideal",
        value_name = "POLICY"
    )]
    pub routing: Vec<Policies>,
    /// When requests arrive: recorded, poisson:RATE[,burstiness=B] (sessions per second),
    /// closed:CONCURRENCY (sessions at a time).
    #[arg(long, default_value = "closed:8", value_name = "ARRIVAL")]
    pub arrival: Arrival,
    /// Prompt tokens a replica prefills per second.
    #[arg(long, value_name = "TOKENS_PER_SECOND")]
    pub prefill_tps: f64,
    /// Tokens a request decodes per second (delays the session's next turn).
    #[arg(long, value_name = "TOKENS_PER_SECOND")]
    pub decode_tps: Option<f64>,
    /// Add each request's served tokens to the JSON output (in the order of the sessions and
    /// their turns), to compare with what an engine reported.
    #[arg(long)]
    pub per_request: bool,
    /// The seed of random routing and arrivals.
    #[arg(long, default_value = "0")]
    pub seed: u64,
    #[command(flatten)]
    pub trace: TraceArgs,
    #[arg(long, value_enum, default_value = "human")]
    pub format: SimulateFormat,
    /// Write the results to this file instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SimulateFormat {
    Human,
    Json,
    /// A self-contained page with plots: served and computed tokens, TTFT percentiles, and
    /// the sweep over replicas and cache sizes.
    Html,
}

pub fn run(mut args: Args) -> miette::Result<Outcome> {
    if args.prefill_tps.is_nan() || args.prefill_tps <= 0.0 {
        miette::bail!("--prefill-tps must be a positive number of tokens per second");
    }
    // The trace's blocks are the engine's.
    args.trace.block = Some(args.engine.block_size());
    let traced = traced(&args.sessions, &args.dataset, &args.trace)?;
    let mut setups = Vec::new();
    for &replicas in &args.replicas {
        for &cache in &args.cache {
            for &policy in args.routing.iter().flat_map(|policies| &policies.0) {
                setups.push(Setup {
                    replicas,
                    cache,
                    engine: args.engine,
                    policy,
                    arrival: args.arrival,
                    prefill_tps: args.prefill_tps,
                    decode_tps: args.decode_tps,
                    seed: args.seed,
                    per_request: args.per_request,
                });
            }
        }
    }
    let results: Vec<SimulationResult> = setups
        .par_iter()
        .map(|setup| simulate(&traced.trace, setup))
        .collect::<Result<_, _>>()
        .map_err(miette::Report::new)?;
    let text = match args.format {
        SimulateFormat::Json => {
            let mut json = serde_json::to_string_pretty(&results).into_diagnostic()?;
            json.push('\n');
            json
        }
        SimulateFormat::Human => human(&results, traced.trace.input_tokens()),
        SimulateFormat::Html => simulation_html("kvlint simulate", &results),
    };
    Ok(Outcome {
        output: deliver(args.output.as_deref(), text)?,
        exit_code: 0,
    })
}

fn human(results: &[SimulationResult], prompt_tokens: u64) -> String {
    let mut text = format!(
        "{} prompt tokens; {}, arrivals {}\n\n  {:<28} {:>8} {:>16} {:>7} {:>14} {:>14} {:>10} {:>9} {:>9} {:>9} {:>9}\n",
        prompt_tokens,
        results.first().map_or("", |result| result.engine.as_str()),
        results.first().map_or("", |result| result.arrival.as_str()),
        "routing",
        "replicas",
        "cache",
        "hit",
        "computed",
        "lost locality",
        "evicted",
        "imbalance",
        "TTFT p50",
        "p95",
        "p99",
    );
    for result in results {
        text.push_str(&format!(
            "  {:<28} {:>8} {:>16} {:>6.1}% {:>14} {:>14} {:>10} {:>9.2} {:>8.3}s {:>8.3}s {:>8.3}s\n",
            result.policy,
            result.replicas,
            result.cache,
            100.0 * result.hit_rate,
            result.computed_tokens,
            result.lost_locality_tokens,
            result.evicted_blocks,
            result.imbalance,
            result.ttft.p50,
            result.ttft.p95,
            result.ttft.p99,
        ));
    }
    let mut beliefs = String::new();
    for result in results {
        if let Some(belief) = &result.belief {
            beliefs.push_str(&format!(
                "  {:<28} {:>8} {:>16} {:>14} {:>20} {:>20}\n",
                result.policy,
                result.replicas,
                result.cache,
                belief.predicted_tokens,
                belief.predicted_not_served_tokens,
                belief.served_not_predicted_tokens,
            ));
        }
    }
    if !beliefs.is_empty() {
        text.push_str(&format!(
            "\n  the router's belief against the engines' truth, in prompt tokens:\n  {:<28} {:>8} {:>16} {:>14} {:>20} {:>20}\n{beliefs}",
            "routing", "replicas", "cache", "predicted", "predicted not served", "served not predicted",
        ));
    }
    text
}
