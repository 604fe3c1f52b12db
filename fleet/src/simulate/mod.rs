//! `kvlint simulate`: a workload replayed through N replicas, each with a finite prefix cache
//! modelled like its engine ([`crate::cache`]), under routing policies, with a queueing model
//! of prefill for time to first token.
//!
//! Events happen in time order. A request arrives (at its recorded time, or when its session's
//! previous request has finished and the recorded think time has passed); the policy picks a
//! replica; the replica's cache serves what it holds of the prompt and keeps the rest; the
//! replica prefills the remaining tokens, one request after the other, at the given
//! throughput: the time to first token is the wait for the replica plus that prefill. Decoding
//! runs beside prefill (continuous batching) and only delays the session's next turn.

mod bounds;
mod calibrate;
mod compare;
mod fleet;
mod loss;
mod realism;
mod routers;
mod run;
mod sweep;

use std::fmt;
use std::str::FromStr;

use kvlint_protocol::{EngineName, Spec};
use serde::Serialize;

use crate::cache::{BlockPool, RadixTree, ReplicaCache, SGLANG_PAGE_SIZE, Slots, VLLM_BLOCK_SIZE};
use crate::error::SpecError;

pub use calibrate::{
    Agreement, AgreementSummary, CalibrateError, CalibratedRequest, Calibration, RecordedRequest,
    ServedComparison, calibrate,
};
pub use compare::{Ranked, Ranking, rank};
pub use loss::{Busiest, Loss, ServedCause, TailCause};
pub use realism::FleetOptions;
pub use routers::{
    AibrixConfig, Branch, DynamoConfig, DynamoCost, Knob, LlmdConfig, LlmdIndex, POLICIES,
    PolicyKnobs, RayConfig, SglangConfig, SglangIndex, SglangMiss, SmgConfig, SmgMiss,
    routing_help,
};
use routers::{only_knobs, write_policy};
pub use run::{simulate, simulate_streamed, streamable};
pub use sweep::{Along, KNEE_GAIN, SweepGrid, SweepRow, sweep_grid};

/// The engine whose cache each replica models: `vllm[:block=16]`, `sglang[:page=1]`,
/// `llamacpp[:slots=1][,block=1]` (llama.cpp matches tokens: its trace has a hash per token;
/// `block=16` keeps one per 16 tokens for very large workloads, and counts a match with
/// another session's sequence in whole blocks, which can change the slot and prompt-cache
/// choices the simulation makes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimEngine {
    Vllm { block: u32 },
    Sglang { page: u32 },
    LlamaCpp { slots: u32, block: u32 },
}

/// The block size llama.cpp traces are kept at by default: a token, as llama.cpp matches.
pub const LLAMACPP_TRACE_BLOCK: u32 = 1;

impl SimEngine {
    /// Tokens per block of the trace this engine is simulated on.
    pub fn block_size(self) -> u32 {
        match self {
            Self::Vllm { block } => block,
            Self::Sglang { page } => page,
            Self::LlamaCpp { block, .. } => block,
        }
    }

    /// A replica's cache of `size`, modelled like this engine (what `kvlint simulate` and the
    /// proxy's predictions both use).
    pub fn cache(self, size: CacheSize) -> ReplicaCache {
        let block = self.block_size();
        match self {
            Self::Vllm { block } => ReplicaCache::Vllm(BlockPool::new(block, size.blocks(block))),
            Self::Sglang { page } => ReplicaCache::Sglang(RadixTree::new(page, size.blocks(page))),
            Self::LlamaCpp { slots, .. } => ReplicaCache::LlamaCpp(Slots::new(
                block,
                slots as usize,
                match size {
                    CacheSize::Unbounded => Some(u64::MAX),
                    sized => sized.tokens(block).filter(|tokens| *tokens > 0),
                },
            )),
        }
    }
}

impl fmt::Display for SimEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Vllm { block } => write!(f, "vllm:block={block}"),
            Self::Sglang { page } => write!(f, "sglang:page={page}"),
            Self::LlamaCpp { slots, block } => write!(f, "llamacpp:slots={slots},block={block}"),
        }
    }
}

impl FromStr for SimEngine {
    type Err = SpecError;

    /// Read by [`kvlint_protocol::engine::Spec`], as every engine spec is.
    fn from_str(text: &str) -> Result<Self, SpecError> {
        let spec = Spec::parse(text);
        let positive = |key: &str, default: u32| -> Result<u32, SpecError> {
            let value = spec.positive(key, u64::from(default))?;
            u32::try_from(value).map_err(|_| spec.error(format!("`{key}` is too large")).into())
        };
        let engine = match spec.engine() {
            Ok(EngineName::Vllm) => {
                spec.only(&["block"])?;
                Self::Vllm {
                    block: positive("block", VLLM_BLOCK_SIZE)?,
                }
            }
            Ok(EngineName::Sglang) => {
                spec.only(&["page"])?;
                Self::Sglang {
                    page: positive("page", SGLANG_PAGE_SIZE)?,
                }
            }
            Ok(EngineName::LlamaCpp) => {
                spec.only(&["slots", "block"])?;
                Self::LlamaCpp {
                    slots: positive("slots", 1)?,
                    block: positive("block", LLAMACPP_TRACE_BLOCK)?,
                }
            }
            _ => {
                return Err(spec
                    .error("one of vllm[:block=16], sglang[:page=1], llamacpp[:slots=1][,block=1]")
                    .into());
            }
        };
        Ok(engine)
    }
}

/// A replica's cache size: blocks (`4096`, `4096blocks`) or tokens (`65536tokens`); for
/// llama.cpp, the tokens its host prompt cache holds (`0`: none, `--cache-ram 0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheSize {
    Blocks(u64),
    Tokens(u64),
    Unbounded,
}

impl CacheSize {
    fn blocks(self, block_size: u32) -> Option<usize> {
        match self {
            Self::Blocks(blocks) => Some(blocks as usize),
            Self::Tokens(tokens) => Some((tokens / u64::from(block_size.max(1))) as usize),
            Self::Unbounded => None,
        }
    }

    fn tokens(self, block_size: u32) -> Option<u64> {
        match self {
            Self::Blocks(blocks) => Some(blocks * u64::from(block_size)),
            Self::Tokens(tokens) => Some(tokens),
            Self::Unbounded => None,
        }
    }
}

impl fmt::Display for CacheSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Blocks(blocks) => write!(f, "{blocks} blocks"),
            Self::Tokens(tokens) => write!(f, "{tokens} tokens"),
            Self::Unbounded => f.write_str("unbounded"),
        }
    }
}

impl FromStr for CacheSize {
    type Err = SpecError;

    fn from_str(spec: &str) -> Result<Self, SpecError> {
        if spec == "unbounded" {
            return Ok(Self::Unbounded);
        }
        let digits = spec.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let number: u64 = digits.parse().map_err(|_| {
            SpecError::new(
                spec,
                "a number of blocks (`4096`), of tokens (`65536tokens`), or `unbounded`",
            )
        })?;
        match &spec[digits.len()..] {
            "" | "b" | "blocks" => Ok(Self::Blocks(number)),
            "t" | "tokens" => Ok(Self::Tokens(number)),
            unit => Err(SpecError::new(
                spec,
                format!("unknown unit `{unit}`: blocks or tokens"),
            )),
        }
    }
}

/// How a request is routed to a replica: one router each, in [`routers`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Policy {
    RoundRobin,
    Random,
    /// The replica with the least prefill queued.
    LeastLoaded,
    /// Consistent hashing on the session (nginx `hash $key consistent`).
    SessionHash,
    /// The replica with the longest cached prefix, unless its queue is over `overload`
    /// seconds: then the least loaded (the escape hatch).
    PrefixAware {
        overload: f64,
    },
    /// One infinite cache shared by every replica: the upper bound.
    Ideal,
    /// Two replicas at random, the one with fewer requests in flight.
    PowerOfTwo,
    /// sglang-router's and vllm-router's `cache_aware`.
    SglangCacheAware(SglangConfig),
    /// Shepherd Model Gateway's `cache_aware`.
    Smg(SmgConfig),
    /// NVIDIA Dynamo's KV router: `dynamo-kv`, `dynamo-lmetric`.
    Dynamo(DynamoConfig),
    /// llm-d's scheduler with the prefix scorer: `llmd-prefix`, `llmd-precise`.
    Llmd(LlmdConfig),
    /// AIBrix's prefix-cache routing.
    Aibrix(AibrixConfig),
    /// Ray Serve LLM's prefix-aware router.
    Ray(RayConfig),
}

/// The prefix-aware policy's default overload: seconds of prefill queued.
const DEFAULT_OVERLOAD: f64 = 5.0;

/// The routers as they are deployed, by the names `--routing` reads: what
/// `kvlint simulate --compare` ranks and the fleet benchmark times, each with its defaults.
const NAMED_ROUTERS: &[&str] = &[
    "power-of-two",
    "sglang-cache-aware",
    "smg-cache-aware",
    "dynamo-kv",
    "dynamo-lmetric",
    "llmd-prefix",
    "llmd-precise",
    "aibrix-prefix",
    "ray-prefix",
];

impl Policy {
    /// Every named router with its real defaults ([`NAMED_ROUTERS`]).
    pub fn named() -> Vec<Policy> {
        NAMED_ROUTERS
            .iter()
            .filter_map(|name| name.parse().ok())
            .collect()
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RoundRobin => f.write_str("round-robin"),
            Self::Random => f.write_str("random"),
            Self::LeastLoaded => f.write_str("least-loaded"),
            Self::SessionHash => f.write_str("session-hash"),
            // Printed always, default or not, as it always was.
            Self::PrefixAware { overload } => {
                write_policy(f, "prefix-aware", |_| Some(overload.to_string()))
            }
            Self::Ideal => f.write_str("ideal"),
            Self::PowerOfTwo => f.write_str("power-of-two"),
            Self::SglangCacheAware(config) => config.fmt(f),
            Self::Smg(config) => config.fmt(f),
            Self::Dynamo(config) => config.fmt(f),
            Self::Llmd(config) => config.fmt(f),
            Self::Aibrix(config) => config.fmt(f),
            Self::Ray(config) => config.fmt(f),
        }
    }
}

impl FromStr for Policy {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<Self, SpecError> {
        let spec = Spec::parse(text);
        let bare = |policy: Policy| -> Result<Policy, SpecError> {
            only_knobs(spec.name, &spec)?;
            Ok(policy)
        };
        match spec.name {
            "round-robin" => bare(Self::RoundRobin),
            "random" => bare(Self::Random),
            "least-loaded" => bare(Self::LeastLoaded),
            "session-hash" => bare(Self::SessionHash),
            "ideal" => bare(Self::Ideal),
            "power-of-two" => bare(Self::PowerOfTwo),
            "prefix-aware" => {
                only_knobs("prefix-aware", &spec)?;
                let overload = match spec.value("overload") {
                    None if spec.options.is_empty() => DEFAULT_OVERLOAD,
                    value => value
                        .and_then(|value| value.parse::<f64>().ok())
                        .filter(|value| *value >= 0.0)
                        .ok_or_else(|| SpecError::new(text, "prefix-aware:overload=SECONDS"))?,
                };
                Ok(Self::PrefixAware { overload })
            }
            "sglang-cache-aware" => Ok(Self::SglangCacheAware(SglangConfig::parse(&spec)?)),
            "smg-cache-aware" => Ok(Self::Smg(SmgConfig::parse(&spec)?)),
            "dynamo-kv" => Ok(Self::Dynamo(DynamoConfig::parse(DynamoCost::Kv, &spec)?)),
            "dynamo-lmetric" => Ok(Self::Dynamo(DynamoConfig::parse(
                DynamoCost::Lmetric,
                &spec,
            )?)),
            "llmd-prefix" => Ok(Self::Llmd(LlmdConfig::parse(
                LlmdIndex::Approximate,
                &spec,
            )?)),
            "llmd-precise" => Ok(Self::Llmd(LlmdConfig::parse(LlmdIndex::Precise, &spec)?)),
            "aibrix-prefix" => Ok(Self::Aibrix(AibrixConfig::parse(&spec)?)),
            "ray-prefix" => Ok(Self::Ray(RayConfig::parse(&spec)?)),
            _ => Err(SpecError::new(text, format!("one of {}", routing_help()))),
        }
    }
}

/// Policies separated by commas, each with its knobs after a colon, also separated by
/// commas: `round-robin,sglang-cache-aware:threshold=0.5,abs=32,ideal` — a piece with `=` and
/// no `:` is a knob of the policy before it.
#[derive(Clone, Debug, PartialEq)]
pub struct Policies(pub Vec<Policy>);

impl FromStr for Policies {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<Self, SpecError> {
        let mut specs: Vec<String> = Vec::new();
        for piece in text.split(',') {
            match specs.last_mut() {
                Some(last) if piece.contains('=') && !piece.contains(':') => {
                    last.push(',');
                    last.push_str(piece);
                }
                _ => specs.push(piece.to_owned()),
            }
        }
        specs
            .iter()
            .map(|spec| spec.parse())
            .collect::<Result<_, _>>()
            .map(Self)
    }
}

/// When requests arrive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arrival {
    /// At their recorded times.
    Recorded,
    /// Sessions start at `rate` per second, the gaps gamma-distributed with a coefficient of
    /// variation of `burstiness` (1: Poisson).
    Poisson { rate: f64, burstiness: f64 },
    /// `concurrency` sessions at a time, the next starting when one ends.
    Closed { concurrency: usize },
}

impl fmt::Display for Arrival {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Recorded => f.write_str("recorded"),
            Self::Poisson { rate, burstiness } => {
                write!(f, "poisson:{rate},burstiness={burstiness}")
            }
            Self::Closed { concurrency } => write!(f, "closed:{concurrency}"),
        }
    }
}

impl FromStr for Arrival {
    type Err = SpecError;

    fn from_str(spec: &str) -> Result<Self, SpecError> {
        let invalid = || {
            SpecError::new(
                spec,
                "recorded, poisson:RATE[,burstiness=B] or closed:CONCURRENCY",
            )
        };
        let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
        match name {
            "recorded" if rest.is_empty() => Ok(Self::Recorded),
            "poisson" => {
                let mut parts = rest.split(',');
                let rate: f64 = parts
                    .next()
                    .and_then(|rate| rate.parse().ok())
                    .filter(|rate: &f64| *rate > 0.0)
                    .ok_or_else(invalid)?;
                let mut burstiness = 1.0;
                for part in parts {
                    burstiness = part
                        .strip_prefix("burstiness=")
                        .and_then(|value| value.parse().ok())
                        .filter(|value: &f64| *value > 0.0)
                        .ok_or_else(invalid)?;
                }
                Ok(Self::Poisson { rate, burstiness })
            }
            "closed" => Ok(Self::Closed {
                concurrency: rest
                    .parse()
                    .ok()
                    .filter(|count| *count > 0)
                    .ok_or_else(invalid)?,
            }),
            _ => Err(invalid()),
        }
    }
}

/// One point of a simulation.
#[derive(Clone, Debug)]
pub struct Setup {
    pub replicas: usize,
    pub cache: CacheSize,
    pub engine: SimEngine,
    pub policy: Policy,
    pub arrival: Arrival,
    /// Prompt tokens a replica prefills per second.
    pub prefill_tps: f64,
    /// Tokens a request decodes per second; `None`: answers take no time.
    pub decode_tps: Option<f64>,
    pub seed: u64,
    /// Keep each request's served tokens in the result (for comparing with an engine).
    pub per_request: bool,
    pub fleet: FleetOptions,
}

/// Two bounds on the served tokens of a run's requests, in the order it served them (the
/// module `bounds` defines them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Bounds {
    /// One infinite cache every replica shares: every block held before anywhere is served.
    pub infinite_served_tokens: u64,
    /// Belady's farthest-next-use eviction in one pool of replicas × cache blocks: what the
    /// best possible eviction serves at this capacity; `None` for llama.cpp.
    pub belady_served_tokens: Option<u64>,
}

/// One replica's share of the work.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReplicaLoad {
    pub requests: u64,
    pub prompt_tokens: u64,
    pub computed_tokens: u64,
}

/// Time to first token, in seconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

/// A router's belief against the engines' truth, summed over the requests: the prompt
/// tokens the router expected the replica it chose to serve from cache, and what was served.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Belief {
    pub predicted_tokens: u64,
    /// Predicted hits the engine did not serve (the router believed in a prefix the engine
    /// had evicted, or never held).
    pub predicted_not_served_tokens: u64,
    /// Served tokens the router did not predict (the engine kept what the router forgot or
    /// never saw, such as generated tokens).
    pub served_not_predicted_tokens: u64,
}

/// What one point of a simulation found: its setting, typed (written as `--routing`,
/// `--cache`, `--engine` and `--arrival` spell them), and the figures measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimulationResult {
    #[serde(serialize_with = "as_spelled")]
    pub policy: Policy,
    #[serde(serialize_with = "as_spelled")]
    pub cache: CacheSize,
    #[serde(serialize_with = "as_spelled")]
    pub engine: SimEngine,
    pub replicas: usize,
    #[serde(serialize_with = "as_spelled")]
    pub arrival: Arrival,
    pub requests: u64,
    pub prompt_tokens: u64,
    pub served_tokens: u64,
    pub computed_tokens: u64,
    pub hit_rate: f64,
    /// Served tokens the replica of the session's previous request held and the serving one
    /// did not: lost to locality.
    pub lost_locality_tokens: u64,
    /// Requests that went to another replica than their session's previous one.
    pub replica_changes: u64,
    pub evicted_blocks: u64,
    pub per_replica: Vec<ReplicaLoad>,
    /// The busiest replica's computed tokens over the mean.
    pub imbalance: f64,
    pub ttft: Latency,
    /// Simulated seconds from the first arrival to the last answer.
    pub makespan: f64,
    /// What the router believed each chosen replica held, against what it served; `None`
    /// for a router without an index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub belief: Option<Belief>,
    /// Per request (trace order), the tokens served from cache, when asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served_per_request: Option<Vec<u32>>,
    /// Router replicas without shared state.
    pub routers: usize,
    /// Seconds the routers' signals lag behind the replicas.
    pub signal_delay: f64,
    /// Each replica's speed relative to `prefill_tps` and `decode_tps`, when not all 1.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replica_speed: Vec<f64>,
    /// What no router and no eviction could beat, when asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bounds: Option<Bounds>,
}

/// A setting as the command line spells it (its `Display`).
pub(crate) fn as_spelled<S: serde::Serializer>(
    setting: &impl fmt::Display,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(setting)
}

#[cfg(test)]
mod tests;
