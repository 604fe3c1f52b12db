//! `kvlint simulate SESSIONS…`: the workload replayed through N replicas whose caches are
//! modelled on their engine, for each routing policy, replica count and cache size asked: what
//! is served from cache, what is lost to locality and to eviction, how the load spreads, and
//! the time to first token. The trace is `kvlint workload`'s (kept on disk), so a sweep costs
//! only the simulation.

use std::path::PathBuf;

use kvlint_fleet::hashed_trace::{HashedFormat, StreamedTrace};
use kvlint_fleet::{
    Arrival, CacheSize, FleetOptions, Policies, Policy, Setup, SimEngine, SimulationResult, rank,
    routing_help, simulate, simulate_streamed, streamable,
};
use kvlint_workload::html::simulation_html;
use rayon::prelude::*;

use super::Outcome;
use super::workload::{TraceArgs, TraceFormat, Traced, deliver, log_to_stderr, traced};
use crate::emit::{human, json};

mod calibrate;

#[derive(Debug, clap::Args)]
#[command(after_help = "Example:
  kvlint simulate sessions/ --replicas 4 --cache 20000 --engine vllm:block=16 \\
      --routing round-robin,session-hash,prefix-aware,ideal --arrival poisson:2 --prefill-tps 8000
  kvlint simulate sessions/ --replicas 2,4 --cache 5000,20000,unbounded --prefill-tps 8000 \\
      --format html -o fleet.html
  kvlint simulate sessions/ --replicas 4 --cache 20000 --arrival poisson:2 --prefill-tps 8000 \\
      --compare                         which deployed router, ranked, and why each loses")]
pub struct Args {
    /// Session files, recordings or folders: anything `kvlint check` reads.
    pub sessions: Vec<PathBuf>,
    /// Calibrate the model of the deployed router (--routing, one policy) on sessions `kvlint
    /// proxy --record` wrote in front of the real fleet (each line names its `replica`): the
    /// recorded arrivals replayed, teacher-forced, and per request the recorded replica and
    /// served tokens against the model's (docs/simulate-calibrate.md). The replicas are those
    /// the recordings name; --replicas and --arrival are not read.
    #[arg(
        long,
        value_name = "RECORDINGS",
        conflicts_with_all = ["sessions", "dataset", "replicas"]
    )]
    pub calibrate: Vec<PathBuf>,
    /// The replicas in the deployed router's order (its --worker-urls, nginx's `server`
    /// lines), comma-separated, where its ties fall by position; default: the order they first
    /// served a request. Compared without `http://`, `https://` and a trailing `/`.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "URL",
        requires = "calibrate"
    )]
    pub calibrate_replicas: Vec<String>,
    /// Calibrate without teacher forcing: the model follows its own decisions, so one
    /// disagreement changes what follows.
    #[arg(long, requires = "calibrate")]
    pub calibrate_free: bool,
    /// Benchmark datasets, as `kvlint workload --dataset` reads them.
    #[arg(long, value_name = "FILE")]
    pub dataset: Vec<PathBuf>,
    /// Replicas (several, comma-separated, for a sweep: the report tables each policy's hit rate
    /// along it and marks its knee, the first point whose next serves under 5 % more per
    /// doubling).
    #[arg(long, value_delimiter = ',', default_value = "2", value_name = "N")]
    pub replicas: Vec<usize>,
    /// Each replica's cache: blocks (`4096`), tokens (`65536tokens`) or `unbounded`; for
    /// llama.cpp, its host prompt cache (`0`: none). Several, comma-separated, for a sweep (its
    /// table and knee as for --replicas).
    #[arg(long, value_delimiter = ',', required = true, value_name = "SIZE")]
    pub cache: Vec<CacheSize>,
    /// The engine each replica's cache is modelled on: vllm[:block=16], sglang[:page=1],
    /// llamacpp[:slots=1].
    #[arg(long, default_value = "vllm", value_name = "ENGINE")]
    pub engine: SimEngine,
    // Its help lists every policy with its knobs, from the routers' one table of knobs
    // (`kvlint_fleet::POLICIES`).
    #[arg(long, value_name = "POLICY", help = routing_help_text())]
    pub routing: Vec<Policies>,
    /// The decision report: rank the policies (every named router with its defaults, unless
    /// --routing names others) at each replica count and cache by served tokens, TTFT p99 and
    /// load imbalance (the busiest replica's prefilled tokens over the mean), each loser with
    /// the measured reason it loses against the winner.
    #[arg(long, conflicts_with = "calibrate")]
    pub compare: bool,
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
    /// Milliseconds the routers' load signals (queue, running, waiting, prefill tokens) and
    /// the engines' KV events lag behind the replicas: a router decides on the replicas' load
    /// as it was that long ago, and a router that follows KV events (prefix-aware, dynamo-kv,
    /// dynamo-lmetric, llmd-precise) on each engine's cache as it was then.
    #[arg(long, default_value = "0", value_name = "MS")]
    pub signal_delay: f64,
    /// Router replicas without shared state, each with its own index and counters, a front
    /// balancer sending each request to the next in turn (round-robin). Several,
    /// comma-separated, for a sweep; 1 is always simulated beside them, to show what the
    /// others lose.
    #[arg(long, value_delimiter = ',', default_value = "1", value_name = "N")]
    pub routers: Vec<usize>,
    /// Each replica's prefill and decode speed relative to --prefill-tps and --decode-tps,
    /// comma-separated in replica order (`1,1,0.5`: the third replica at half speed); a
    /// replica not listed runs at 1.
    #[arg(long, value_delimiter = ',', value_name = "SPEED")]
    pub replica_speed: Vec<f64>,
    /// Leave out the two bounds every run reports (the infinite shared cache and Belady's
    /// eviction): on a trace of millions of requests Belady's bound holds each run's blocks
    /// once more in memory, 12 bytes each, and a Mooncake trace in time order can then be read
    /// as it goes rather than whole (docs/hashed-traces.md).
    #[arg(long)]
    pub no_bounds: bool,
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
    if !args.calibrate.is_empty() {
        return calibrate::run(&args);
    }
    // The trace's blocks are the engine's.
    args.trace.block = Some(args.engine.block_size());
    if !args.signal_delay.is_finite() || args.signal_delay < 0.0 {
        miette::bail!("--signal-delay must be a number of milliseconds, 0 or more");
    }
    if args.routers.contains(&0) {
        miette::bail!("--routers must be 1 or more");
    }
    if args
        .replica_speed
        .iter()
        .any(|speed| !speed.is_finite() || *speed <= 0.0)
    {
        miette::bail!("--replica-speed must be positive numbers, one per replica");
    }
    let mut routers = args.routers.clone();
    if !routers.contains(&1) {
        routers.insert(0, 1);
    }
    let policies: Vec<Policy> = match (args.routing.is_empty(), args.compare) {
        (false, _) => args
            .routing
            .iter()
            .flat_map(|list| list.0.clone())
            .collect(),
        (true, true) => Policy::named(),
        (true, false) => {
            DEFAULT_ROUTING
                .parse::<Policies>()
                .map_err(miette::Report::new)?
                .0
        }
    };
    let mut setups = Vec::new();
    for &replicas in &args.replicas {
        for &cache in &args.cache {
            for (&policy, &router_count) in policies
                .iter()
                .flat_map(|policy| routers.iter().map(move |routers| (policy, routers)))
            {
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
                    fleet: FleetOptions {
                        signal_delay: args.signal_delay / 1000.0,
                        routers: router_count,
                        replica_speed: args.replica_speed.clone(),
                        bounds: !args.no_bounds,
                    },
                });
            }
        }
    }
    let workload = match streamed(&args, &setups)? {
        Some(streamed) => Workload::Streamed(streamed),
        None => {
            let traced = traced(&args.sessions, &args.dataset, &args.trace)?;
            log_to_stderr(&traced);
            Workload::Whole(Box::new(traced))
        }
    };
    let results: Vec<SimulationResult> = setups
        .par_iter()
        .map(|setup| workload.simulate(setup))
        .collect::<miette::Result<_>>()?;
    let rankings = if args.compare {
        rank(&results)
    } else {
        Vec::new()
    };
    let text = match args.format {
        SimulateFormat::Json => {
            json::simulation(&results, args.compare.then_some(rankings.as_slice()))
        }
        SimulateFormat::Human => human::render_simulation(&results, &rankings),
        SimulateFormat::Html => simulation_html("kvlint simulate", &results, &rankings),
    };
    Ok(Outcome {
        output: deliver(args.output.as_deref(), text)?,
        exit_code: 0,
    })
}

/// What a run simulates: a trace held whole, or a hashed trace read as it goes.
enum Workload {
    Whole(Box<Traced>),
    Streamed(StreamedTrace),
}

impl Workload {
    fn simulate(&self, setup: &Setup) -> miette::Result<SimulationResult> {
        match self {
            Self::Whole(traced) => simulate(&traced.trace, setup).map_err(miette::Report::new),
            Self::Streamed(trace) => simulate_streamed(trace, setup).map_err(miette::Report::new),
        }
    }
}

/// The hashed trace to read as it goes rather than whole, so that a trace of millions of
/// requests costs only the sessions in flight: the one input, a Mooncake file in time order
/// (`StreamedTrace::open`), when every setup can stream it ([`streamable`]: the engine's
/// block size, recorded arrivals, neither the bounds nor the per-request figures).
fn streamed(args: &Args, setups: &[Setup]) -> miette::Result<Option<StreamedTrace>> {
    let [path] = args.trace.hashed_trace.as_slice() else {
        return Ok(None);
    };
    let file_block = args
        .trace
        .hashed_block
        .unwrap_or(HashedFormat::Mooncake.default_block_size());
    let whole_needed = !args.sessions.is_empty()
        || !args.dataset.is_empty()
        || !args.trace.logs.log.is_empty()
        || path.is_dir()
        || setups
            .iter()
            .any(|setup| streamable(file_block, setup).is_err());
    if whole_needed {
        return Ok(None);
    }
    let format = args.trace.hashed_format.map(TraceFormat::format);
    let Some(trace) =
        StreamedTrace::open(path, format, args.trace.hashed_block).map_err(miette::Report::new)?
    else {
        return Ok(None);
    };
    eprintln!(
        "kvlint: {}: {} requests in time order, read as they go",
        path.display(),
        trace.requests
    );
    Ok((trace.block_size == args.engine.block_size()).then_some(trace))
}

/// `--routing`'s help: every policy with its knobs and their defaults.
fn routing_help_text() -> String {
    format!(
        "Routing policies, comma-separated, each with its knobs after a colon: {}. Default: \
         {DEFAULT_ROUTING}; with --compare, every named router",
        routing_help()
    )
}

/// The policies `--routing` simulates when it is not given and `--compare` is not asked.
const DEFAULT_ROUTING: &str = "round-robin,session-hash,prefix-aware,ideal";
