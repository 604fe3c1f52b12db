//! `kvlint workload`: the reuse a workload creates (within a session, across sessions, the
//! prefix-sharing rate), the distributions of its lengths and gaps, and the same reuse with
//! the application's own findings fixed.

use std::collections::HashMap;

use serde::Serialize;

use kvlint_fleet::{Distribution, Trace, arrival_order};

/// Prompt tokens a workload lets an engine reuse.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Reuse {
    /// Leading tokens each request shares with its session's previous request.
    pub within_session_tokens: u64,
    /// The same in whole engine blocks (what a block-granular cache can serve).
    pub within_session_block_tokens: u64,
    /// Tokens beyond those that a request shares with earlier requests of other sessions (a
    /// system prompt and tools several sessions send), in whole blocks.
    pub cross_session_block_tokens: u64,
    /// The share of all prompt tokens, in whole blocks, that an infinite block cache shared
    /// by every request serves: each request's longest run of leading blocks some earlier
    /// request sent (its session's or another's). Whole blocks, so that it is the same
    /// measured on a benchmark that does not say which requests are one session's.
    pub prefix_sharing_rate: f64,
}

/// What each rule's findings cost: tokens the session's previous request had made reusable
/// that the turn did not reuse.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FindingCost {
    pub rule: String,
    pub turns: usize,
    pub tokens: u64,
}

/// A hosted cache the misses are measured against: how long it keeps a prefix after its
/// last use, and the model's prices (USD per million tokens).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostedCache {
    pub lifetime_seconds: Option<f64>,
    pub prices: Option<Prices>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Prices {
    /// `provider/model`, as the price table names it.
    pub model: String,
    pub input: f64,
    pub cached_input: f64,
    /// The price of a token written to the cache (the input price without a write fee).
    pub cache_write: f64,
}

/// The prompt tokens a block cache shared by every request computes, split by whether the
/// application could have avoided them.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Misses {
    /// Sent by no earlier request (the tail of each prompt, first sessions' prefixes): every
    /// cache computes them.
    pub unavoidable_tokens: u64,
    /// Made reusable by the session's previous request and lost to a break kvlint names (the
    /// findings' cost, in whole blocks).
    pub broken_tokens: u64,
    /// Sent by an earlier request, but longer ago than the cache keeps a prefix (idle gaps,
    /// sessions that start after the shared prefix expired); only with a lifetime.
    pub expired_tokens: u64,
    /// The lifetime the expiries were measured against, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifetime_seconds: Option<f64>,
    /// The same in USD, with a model's prices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dollars: Option<MissDollars>,
}

/// Misses in USD: what the tokens were billed, at the write price (the input price where
/// writes cost no more).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MissDollars {
    pub prices: Prices,
    pub unavoidable: f64,
    /// Broken and expired tokens.
    pub avoidable: f64,
    /// What the avoidable tokens would have cost less read from the cache.
    pub avoidable_savings: f64,
}

impl Misses {
    pub fn avoidable_tokens(&self) -> u64 {
        self.broken_tokens + self.expired_tokens
    }

    fn priced(mut self, prices: Option<&Prices>) -> Self {
        self.dollars = prices.map(|prices| {
            let write = prices.cache_write.max(prices.input);
            let usd = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
            let avoidable = self.avoidable_tokens();
            MissDollars {
                prices: prices.clone(),
                unavoidable: usd(self.unavoidable_tokens, write),
                avoidable: usd(avoidable, write),
                avoidable_savings: usd(avoidable, write - prices.cached_input),
            }
        });
        self
    }
}

/// Everything `kvlint workload` says of a workload.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkloadReport {
    pub sessions: usize,
    pub requests: usize,
    pub renderer: String,
    pub block_size: u32,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    /// Full prompt blocks, summed over the requests (what a hashed trace's analyzer counts).
    pub prompt_blocks: u64,
    /// Distinct prompt blocks: distinct prefixes, as each block's hash covers those before it
    /// (a hashed trace's distinct block ids).
    pub distinct_blocks: u64,
    /// The share of prompt blocks an infinite block cache shared by every request serves:
    /// each request's longest run of leading blocks some earlier request sent, in arrival
    /// order. The token counterpart is [`Reuse::prefix_sharing_rate`].
    pub block_hit_rate: f64,
    /// As recorded.
    pub reuse: Reuse,
    /// Had every turn kvlint flags extended the session's previous request (cross-session
    /// sharing as recorded).
    pub ideal: Reuse,
    pub finding_costs: Vec<FindingCost>,
    /// The prompt tokens an infinite block cache shared by every request computes (with the
    /// lifetime given, a cache that lets a prefix go after it), avoidable or not.
    pub misses: Misses,
    pub input_tokens: Distribution,
    /// Tokens each turn adds after what it shares with its session's previous request.
    pub new_tokens: Distribution,
    pub output_tokens_per_request: Distribution,
    pub turns_per_session: Distribution,
    /// Seconds between a session's consecutive requests (the previous answer's time and the
    /// user's or tool's), where the recording has times.
    pub think_time: Option<Distribution>,
    /// Seconds between consecutive requests of the whole workload.
    pub arrival_gaps: Option<Distribution>,
    /// The arrival gaps' coefficient of variation: 1 for Poisson arrivals, more for bursts.
    pub burstiness: Option<f64>,
    /// Per turn of a session (0 first), the share of its prompt the previous turn had made
    /// reusable, averaged over the sessions that have that turn.
    pub reuse_by_turn: Vec<f64>,
}

/// Analyses a trace: [`workload_report_on`] an infinite cache, without prices.
pub fn workload_report(trace: &Trace) -> WorkloadReport {
    workload_report_on(trace, &HostedCache::default())
}

/// Analyses a trace, its misses measured against `cache`.
pub fn workload_report_on(trace: &Trace, cache: &HostedCache) -> WorkloadReport {
    let block = u64::from(trace.block_size);
    let prompt_tokens = trace.input_tokens();
    // Per block hash: the first session that sent it, and whether another did since.
    let mut seen: rustc_hash::FxHashMap<u64, (u32, bool)> = rustc_hash::FxHashMap::default();
    let mut session_blocks: HashMap<u32, Vec<u64>> = HashMap::new();
    let (mut reuse, mut ideal) = (Reuse::default(), Reuse::default());
    let (mut shared_any, mut shared_any_ideal) = (0u64, 0u64);
    let mut costs: HashMap<u16, (usize, u64)> = HashMap::new();
    let (mut prompt_blocks, mut hit_blocks) = (0u64, 0u64);
    let mut misses = Misses {
        lifetime_seconds: cache.lifetime_seconds,
        ..Misses::default()
    };
    // With a lifetime: when each block was last sent (a read or a write keeps it).
    let mut last_sent: rustc_hash::FxHashMap<u64, f64> = rustc_hash::FxHashMap::default();
    for index in arrival_order(trace) {
        let request = &trace.requests[index];
        let blocks = session_blocks.entry(request.session).or_default();
        trace.next_prompt_blocks(index, blocks);
        let mut from_others = 0u64;
        let mut from_any = 0u64;
        let mut counting_others = true;
        for hash in blocks.iter() {
            match seen.get_mut(hash) {
                Some((first, several)) => {
                    from_any += 1;
                    let other = *first != request.session || *several;
                    if counting_others && other {
                        from_others += 1;
                    } else {
                        counting_others = false;
                    }
                    if *first != request.session {
                        *several = true;
                    }
                }
                None => break,
            }
        }
        for hash in blocks.iter() {
            seen.entry(*hash).or_insert((request.session, false));
        }
        let alive = match (cache.lifetime_seconds, request.time) {
            (Some(lifetime), Some(now)) => {
                let alive = blocks
                    .iter()
                    .take(from_any as usize)
                    .take_while(|hash| {
                        last_sent
                            .get(*hash)
                            .is_none_or(|sent| now - sent <= lifetime)
                    })
                    .count() as u64;
                for hash in blocks.iter() {
                    last_sent.insert(*hash, now);
                }
                alive
            }
            _ => from_any,
        };
        prompt_blocks += blocks.len() as u64;
        hit_blocks += from_any;
        let within = u64::from(request.shared_with_previous);
        let within_blocks = within / block * block;
        let cross = (from_others * block).saturating_sub(within);
        reuse.within_session_tokens += within;
        reuse.within_session_block_tokens += within_blocks;
        reuse.cross_session_block_tokens += cross;
        shared_any += within_blocks.max(from_any * block);
        let fixed = match request.finding {
            Some(rule) => {
                let whole = u64::from(request.previous_input_tokens.min(request.input_tokens));
                let cost = costs.entry(rule).or_default();
                cost.0 += 1;
                cost.1 += whole.saturating_sub(within);
                whole.max(within)
            }
            None => within,
        };
        ideal.within_session_tokens += fixed;
        ideal.within_session_block_tokens += fixed / block * block;
        ideal.cross_session_block_tokens += (from_others * block).saturating_sub(fixed);
        let served = within_blocks.max(from_any * block);
        let served_fixed = (fixed / block * block).max(from_any * block);
        shared_any_ideal += served_fixed;
        misses.unavoidable_tokens += u64::from(request.input_tokens).saturating_sub(served_fixed);
        misses.broken_tokens += served_fixed - served;
        misses.expired_tokens += served.saturating_sub(alive * block);
    }
    let rate = |shared: u64| {
        if prompt_tokens == 0 {
            0.0
        } else {
            shared as f64 / prompt_tokens as f64
        }
    };
    reuse.prefix_sharing_rate = rate(shared_any);
    ideal.prefix_sharing_rate = rate(shared_any_ideal);
    let mut finding_costs: Vec<FindingCost> = costs
        .into_iter()
        .map(|(rule, (turns, tokens))| FindingCost {
            rule: trace
                .rules
                .get(usize::from(rule))
                .cloned()
                .unwrap_or_default(),
            turns,
            tokens,
        })
        .collect();
    finding_costs.sort_by(|left, right| {
        right
            .tokens
            .cmp(&left.tokens)
            .then(left.rule.cmp(&right.rule))
    });
    let requests = &trace.requests;
    let lengths = |value: fn(&kvlint_fleet::TraceRequest) -> u32| {
        Distribution::of(
            requests
                .iter()
                .map(|request| f64::from(value(request)))
                .collect(),
        )
    };
    let mut think = Vec::new();
    // Per turn, each request's share of its prompt sent before in its session.
    let mut reuse_by_turn: Vec<Vec<f64>> = Vec::new();
    for session in &trace.sessions {
        let range = session.requests.start as usize..session.requests.end as usize;
        for (turn, index) in range.clone().enumerate() {
            let request = &requests[index];
            if reuse_by_turn.len() <= turn {
                reuse_by_turn.push(Vec::new());
            }
            if request.input_tokens > 0 {
                reuse_by_turn[turn].push(
                    f64::from(request.shared_with_previous) / f64::from(request.input_tokens),
                );
            }
            if turn > 0
                && let (Some(before), Some(now)) = (requests[index - 1].time, request.time)
            {
                think.push(now - before);
            }
        }
    }
    let mut times: Vec<f64> = requests.iter().filter_map(|request| request.time).collect();
    times.sort_by(f64::total_cmp);
    let gaps: Vec<f64> = times.windows(2).map(|pair| pair[1] - pair[0]).collect();
    WorkloadReport {
        sessions: trace.sessions.len(),
        requests: requests.len(),
        renderer: trace.renderer.clone(),
        block_size: trace.block_size,
        prompt_tokens,
        output_tokens: requests
            .iter()
            .map(|request| u64::from(request.output_tokens))
            .sum(),
        prompt_blocks,
        distinct_blocks: seen.len() as u64,
        block_hit_rate: if prompt_blocks == 0 {
            0.0
        } else {
            hit_blocks as f64 / prompt_blocks as f64
        },
        reuse,
        ideal,
        finding_costs,
        misses: misses.priced(cache.prices.as_ref()),
        input_tokens: lengths(|request| request.input_tokens),
        new_tokens: lengths(|request| {
            request.input_tokens - request.shared_with_previous.min(request.input_tokens)
        }),
        output_tokens_per_request: lengths(|request| request.output_tokens),
        turns_per_session: Distribution::of(
            trace
                .sessions
                .iter()
                .map(|session| f64::from(session.requests.end - session.requests.start))
                .collect(),
        ),
        think_time: (!think.is_empty()).then(|| Distribution::of(think)),
        burstiness: Distribution::variation(&gaps),
        arrival_gaps: (!gaps.is_empty()).then(|| Distribution::of(gaps)),
        // Summed in order of size: the same mean whatever order the sessions are in (the
        // rows of a distributed run, joined, order them by file, not by time).
        reuse_by_turn: reuse_by_turn
            .into_iter()
            .map(|mut shares| {
                shares.sort_by(f64::total_cmp);
                if shares.is_empty() {
                    0.0
                } else {
                    shares.iter().sum::<f64>() / shares.len() as f64
                }
            })
            .collect(),
    }
}
