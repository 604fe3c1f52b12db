//! Every policy `--routing` names, with its knobs: one table ([`POLICIES`]) from which a
//! policy's printed spec, its parse errors and the command line's help are generated. A knob's
//! value is read by its router's config; the table says which knobs there are, in the order a
//! spec prints them, with the default the help shows and what each one sets.

use std::fmt;

use kvlint_protocol::Spec;

use crate::error::SpecError;

/// A knob of a policy: `name=value` after the policy's name.
pub struct Knob {
    pub name: &'static str,
    /// The default, as the help shows it (`0.3`), or what the value is when it has none
    /// (`SECONDS`) or when it is one of a few words (`text|tokens`).
    pub default: &'static str,
    /// What it sets, with the router's own name for it.
    pub help: &'static str,
}

/// A policy and its knobs, in the order its spec prints them.
pub struct PolicyKnobs {
    pub name: &'static str,
    pub knobs: &'static [Knob],
}

const fn knob(name: &'static str, default: &'static str, help: &'static str) -> Knob {
    Knob {
        name,
        default,
        help,
    }
}

/// sglang-router's and smg's shared `cache_aware` knobs.
macro_rules! cache_aware_knobs {
    ($($more:expr),* $(,)?) => {
        &[
            knob("threshold", "0.3", "`cache_threshold`: the matched share above which the match decides"),
            knob("abs", "64", "`balance_abs_threshold`: requests in flight"),
            knob("rel", "1.5", "`balance_rel_threshold`"),
            knob("index", "text|tokens", "what the tree holds: characters or token ids"),
            knob("evict", "60", "`eviction_interval_secs`"),
            knob("size", "67108864", "`max_tree_size`: characters or tokens per worker"),
            $($more),*
        ]
    };
}

/// Dynamo's knobs, after those of one cost function.
macro_rules! dynamo_knobs {
    ($($first:expr),* $(,)?) => {
        &[
            $($first,)*
            knob("credit", "1", "`overlap_score_credit`: the credit for blocks a worker holds"),
            knob("temperature", "0", "`router_temperature`: 0 picks the lowest cost"),
            knob("busy", "FRACTION", "`active_decode_blocks_threshold`: a share of the worker's KV blocks"),
            knob("ttl", "SECONDS", "`--no-kv-events`: seconds a routed block is believed held"),
        ]
    };
}

/// Every policy, in the order the help lists them.
pub const POLICIES: &[PolicyKnobs] = &[
    PolicyKnobs {
        name: "round-robin",
        knobs: &[],
    },
    PolicyKnobs {
        name: "random",
        knobs: &[],
    },
    PolicyKnobs {
        name: "least-loaded",
        knobs: &[],
    },
    PolicyKnobs {
        name: "session-hash",
        knobs: &[],
    },
    PolicyKnobs {
        name: "prefix-aware",
        knobs: &[knob(
            "overload",
            "SECONDS",
            "prefill queued past which the least loaded replica takes the request (5)",
        )],
    },
    PolicyKnobs {
        name: "ideal",
        knobs: &[],
    },
    PolicyKnobs {
        name: "power-of-two",
        knobs: &[],
    },
    PolicyKnobs {
        name: "sglang-cache-aware",
        knobs: cache_aware_knobs![
            knob(
                "miss",
                "load|tree",
                "a miss goes to the fewest requests in flight, or to the smallest tree"
            ),
            knob(
                "flavor",
                "sglang-router|vllm-router",
                "whose defaults: sglang-router 0.3.2's or vllm-router 0.1.17's"
            ),
        ],
    },
    PolicyKnobs {
        name: "smg-cache-aware",
        knobs: cache_aware_knobs![
            knob(
                "miss",
                "wait|routed",
                "a miss goes to the least expected wait (smg 1.13), or to the least routed"
            ),
            knob(
                "warmup",
                "0",
                "smg's warm-up slice (`--worker-warmup-secs`): only 0 is modelled"
            ),
        ],
    },
    PolicyKnobs {
        name: "dynamo-kv",
        knobs: dynamo_knobs![knob("scale", "1", "`prefill_load_scale`")],
    },
    PolicyKnobs {
        name: "dynamo-lmetric",
        knobs: dynamo_knobs![],
    },
    PolicyKnobs {
        name: "llmd-prefix",
        knobs: &[
            knob(
                "weights",
                "3/2/2",
                "the prefix, queue and KV-utilisation scorers' weights",
            ),
            knob("nohit", "0", "the no-hit LRU scorer's weight"),
            knob("chars", "64", "characters per hashed block"),
            knob("blocks", "256", "blocks hashed at most"),
            knob("lru", "31250", "LRU entries per pod"),
        ],
    },
    PolicyKnobs {
        name: "llmd-precise",
        knobs: &[
            knob(
                "weights",
                "3/2/2",
                "the prefix, queue and KV-utilisation scorers' weights",
            ),
            knob("nohit", "2", "the no-hit LRU scorer's weight"),
            knob("block", "64", "tokens per block of the precise scorer"),
        ],
    },
    PolicyKnobs {
        name: "aibrix-prefix",
        knobs: &[
            knob("chars", "4", "characters per hashed block"),
            knob("entries", "200000", "hashes the index keeps"),
            knob("ttl", "1200", "seconds an unused hash stays"),
            knob(
                "factor",
                "F",
                "the load gate also needs the busiest over `factor × (mean + 1)`",
            ),
            knob(
                "gap",
                "8",
                "the load gate: the busiest more than `gap` requests above the idlest",
            ),
            knob(
                "sigma",
                "1",
                "matching pods may run at most `mean + sigma × σ` requests",
            ),
        ],
    },
    PolicyKnobs {
        name: "ray-prefix",
        knobs: &[
            knob(
                "imbalance",
                "10",
                "`imbalanced_threshold`: requests ongoing",
            ),
            knob("match", "0.1", "`match_rate_threshold`"),
            knob(
                "evict",
                "CHARS",
                "`eviction_threshold_chars`: eviction on past it",
            ),
            knob("target", "CHARS", "`eviction_target_chars`"),
            knob("interval", "10", "`eviction_interval_secs`"),
        ],
    },
];

/// The knobs of the policy `name`.
pub fn knobs_of(name: &str) -> &'static [Knob] {
    POLICIES
        .iter()
        .find(|policy| policy.name == name)
        .map_or(&[], |policy| policy.knobs)
}

/// The policies and their knobs as the help lists them: `round-robin, …,
/// prefix-aware[:overload=SECONDS], …`.
pub fn routing_help() -> String {
    POLICIES
        .iter()
        .map(PolicyKnobs::usage)
        .collect::<Vec<_>>()
        .join(", ")
}

impl PolicyKnobs {
    /// `name`, or `name[:knob=default,…]`.
    pub fn usage(&self) -> String {
        if self.knobs.is_empty() {
            return self.name.to_owned();
        }
        let knobs: Vec<String> = self
            .knobs
            .iter()
            .map(|knob| format!("{}={}", knob.name, knob.default))
            .collect();
        format!("{}[:{}]", self.name, knobs.join(","))
    }
}

/// `spec` names no knob of `policy` but those of its table; the error lists them.
pub fn only_knobs(policy: &str, spec: &Spec<'_>) -> Result<(), SpecError> {
    let knobs = knobs_of(policy);
    let names: Vec<&str> = knobs.iter().map(|knob| knob.name).collect();
    spec.only(&names).map_err(|error| {
        let listed: Vec<String> = knobs
            .iter()
            .map(|knob| format!("{}={} ({})", knob.name, knob.default, knob.help))
            .collect();
        let reason = if listed.is_empty() {
            format!("{}; {policy} has no knobs", error.reason)
        } else {
            format!("{}; {policy}'s knobs: {}", error.reason, listed.join("; "))
        };
        SpecError::new(&error.spec, reason)
    })
}

/// `policy` alone, or `policy:knob=value,…` with each knob `value_of` gives (those that differ
/// from the defaults), in the table's order.
pub fn write_policy(
    f: &mut fmt::Formatter<'_>,
    policy: &str,
    value_of: impl Fn(&str) -> Option<String>,
) -> fmt::Result {
    let knobs: Vec<String> = knobs_of(policy)
        .iter()
        .filter_map(|knob| value_of(knob.name).map(|value| format!("{}={value}", knob.name)))
        .collect();
    if knobs.is_empty() {
        f.write_str(policy)
    } else {
        write!(f, "{policy}:{}", knobs.join(","))
    }
}
