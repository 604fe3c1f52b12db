use super::*;

/// A result of `policy` on `replicas` replicas with a cache of `cache`, which served `served`
/// of `prompt_tokens` prompt tokens: the figures the ranking's and the sweep's tests vary; the
/// others at rest (one request, even load, no latency).
pub(crate) fn result_of(
    policy: &str,
    replicas: usize,
    cache: CacheSize,
    served: u64,
    prompt_tokens: u64,
) -> SimulationResult {
    SimulationResult {
        policy: policy.parse().unwrap(),
        cache,
        engine: SimEngine::Vllm { block: 16 },
        replicas,
        arrival: Arrival::Closed { concurrency: 8 },
        requests: 1,
        prompt_tokens,
        served_tokens: served,
        computed_tokens: prompt_tokens - served,
        hit_rate: served as f64 / prompt_tokens as f64,
        lost_locality_tokens: 0,
        replica_changes: 0,
        evicted_blocks: 0,
        per_replica: Vec::new(),
        imbalance: 1.0,
        ttft: Latency {
            p50: 0.0,
            p95: 0.0,
            p99: 0.0,
            max: 0.0,
        },
        makespan: 0.0,
        belief: None,
        served_per_request: None,
        routers: 1,
        signal_delay: 0.0,
        replica_speed: Vec::new(),
        bounds: None,
    }
}

#[test]
fn named_routers_read_their_real_defaults_and_every_knob() {
    assert_eq!(
        "sglang-cache-aware".parse::<Policy>().unwrap(),
        Policy::SglangCacheAware(SglangConfig {
            threshold: 0.3,
            abs: 64,
            rel: 1.5,
            index: SglangIndex::Text,
            evict: 60,
            size: 67_108_864,
            miss: SglangMiss::Load,
        })
    );
    assert_eq!(
        "llmd-prefix".parse::<Policy>().unwrap(),
        Policy::Llmd(LlmdConfig {
            index: LlmdIndex::Approximate,
            weights: [3.0, 2.0, 2.0],
            nohit: 0.0,
            block: 64,
            chars: 64,
            blocks: 256,
            lru: 31_250,
        })
    );
    assert_eq!(
        "dynamo-kv".parse::<Policy>().unwrap(),
        Policy::Dynamo(DynamoConfig {
            cost: DynamoCost::Kv,
            scale: 1.0,
            credit: 1.0,
            temperature: 0.0,
            busy: None,
            ttl: None,
        })
    );
    // Each spec shows the knobs that differ from the defaults, and reads back the same.
    for spec in [
        "power-of-two",
        "sglang-cache-aware:threshold=0.5,abs=32,rel=2,index=tokens,evict=120,size=1000",
        "smg-cache-aware:threshold=0.5,abs=32,rel=2,index=tokens,evict=120,size=1000",
        "smg-cache-aware:abs=32,miss=routed",
        "dynamo-kv:scale=2,credit=0.5,temperature=0.3,busy=0.85,ttl=120",
        "dynamo-lmetric:credit=0.5,ttl=60",
        "llmd-prefix:weights=3/2/0,chars=128,blocks=64,lru=1000",
        "llmd-precise:weights=1/1/1",
        "llmd-precise:weights=2/1/1,nohit=0,block=16",
        "prefix-aware:overload=2",
        "aibrix-prefix:chars=512,entries=100,ttl=60,factor=1.5,gap=16,sigma=2",
        "ray-prefix:imbalance=4,match=0.3,evict=1000,target=900,interval=5",
    ] {
        let policy: Policy = spec.parse().unwrap();
        assert_eq!(policy.to_string(), spec);
    }
    // Knobs separated by commas in a list of policies belong to the policy before them.
    let Policies(list) = "round-robin,sglang-cache-aware:threshold=0.5,abs=32,ideal"
        .parse()
        .unwrap();
    assert_eq!(list.len(), 3);
    assert_eq!(
        list[1].to_string(),
        "sglang-cache-aware:threshold=0.5,abs=32"
    );
    assert_eq!(list[2], Policy::Ideal);
}

#[test]
fn every_named_router_reads_with_its_defaults() {
    let named = Policy::named();
    assert_eq!(named.len(), NAMED_ROUTERS.len());
    for (policy, name) in named.iter().zip(NAMED_ROUTERS) {
        assert_eq!(policy.to_string(), *name);
    }
}

#[test]
fn a_bad_knob_says_what_is_expected() {
    for (spec, expected) in [
        (
            "sglang-cache-aware:threshold=2",
            "`threshold` must be a number from 0 to 1",
        ),
        (
            "sglang-cache-aware:index=bytes",
            "`index` is text or tokens",
        ),
        ("sglang-cache-aware:abs=-1", "`abs` must be a whole number"),
        ("dynamo-kv:temp=1", "unknown option `temp=1`"),
        ("dynamo-kv:busy=1.5", "`busy` must be a number from 0 to 1"),
        // The pull request's lmetric cost does not scale the prefill term.
        (
            "dynamo-lmetric:scale=2",
            "`scale` does not apply to dynamo-lmetric",
        ),
        (
            "llmd-prefix:weights=3/2/2/1",
            "`weights` is PREFIX/QUEUE[/KV]",
        ),
        ("llmd-precise:lru=10", "unknown option `lru=10`"),
        ("llmd-prefix:lru=0", "`lru` must be a positive integer"),
        ("power-of-two:k=3", "unknown option `k=3`"),
        ("aibrix-prefix:sigma=x", "`sigma` must be a number"),
        ("aibrix-prefix:ttl=0", "`ttl` must be a positive integer"),
        ("ray-prefix:target=10", "`target` needs `evict`"),
        (
            "ray-prefix:evict=10,target=20",
            "`target` is at most `evict`",
        ),
        ("sticky", "sglang-cache-aware[:threshold=0.3"),
    ] {
        let error = spec.parse::<Policies>().unwrap_err();
        assert_eq!(error.spec, spec);
        assert!(error.reason.contains(expected), "{spec}: {}", error.reason);
    }
}

/// One table of knobs: each knob it names is read by its policy's parser and printed back as
/// read; a knob it does not name is refused with the policy's knobs listed; the help and the
/// unknown-policy error list every knob, `miss=` included.
#[test]
fn every_knob_of_the_table_is_read_and_printed_back() {
    // A value of the kind the help shows: the default, the first of its words, else 1.
    let sample = |default: &'static str| match default.split_once('|') {
        Some((first, _)) => first,
        None if default.parse::<f64>().is_ok() => default,
        None => "1",
    };
    for policy in POLICIES {
        for knob in policy.knobs {
            let spec = format!("{}:{}={}", policy.name, knob.name, sample(knob.default));
            match spec.parse::<Policy>() {
                Ok(read) => assert_eq!(read.to_string().parse::<Policy>().ok(), Some(read)),
                Err(error) => assert!(!error.reason.contains("unknown"), "{spec}: {error:?}"),
            }
            // Changed from its default, a knob is printed under its own name.
            if let Ok(number) = knob.default.parse::<f64>() {
                let changed = format!("{}:{}={}", policy.name, knob.name, number + 1.0);
                if let Ok(read) = changed.parse::<Policy>() {
                    assert!(
                        read.to_string().contains(&format!("{}=", knob.name)),
                        "{changed}: {read}"
                    );
                }
            }
        }
        let unknown = format!("{}:nope=1", policy.name)
            .parse::<Policy>()
            .unwrap_err();
        for knob in policy.knobs {
            assert!(
                unknown
                    .reason
                    .contains(&format!("{}={}", knob.name, knob.default)),
                "{}: {}",
                policy.name,
                unknown.reason
            );
        }
    }
    let unknown_policy = "sticky".parse::<Policy>().unwrap_err();
    assert!(unknown_policy.reason.contains("miss=load|tree"));
    assert!(unknown_policy.reason.contains(&routing_help()));
    assert_eq!(POLICIES.len(), 15);
}
