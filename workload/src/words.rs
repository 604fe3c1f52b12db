//! The words the command line and the pages share for a simulation's figures: numbers for
//! reading, and why a policy loses against the winner of its point ([`loss_sentence`]).

use kvlint_fleet::{Busiest, Loss, ServedCause, TailCause};

/// `number` with its thousands grouped: 4,958,720.
pub fn grouped(number: u64) -> String {
    let digits = number.to_string();
    let mut text = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            text.push(',');
        }
        text.push(digit);
    }
    text
}

/// `part` of `whole` in percent, one decimal.
pub fn percent_of(part: u64, whole: u64) -> String {
    format!("{:.1} %", 100.0 * part as f64 / whole.max(1) as f64)
}

/// Why a policy loses, in one line: the measure it is furthest behind on, then what the
/// simulation measured behind that.
pub fn loss_sentence(loss: &Loss) -> String {
    match loss {
        Loss::FewerServed {
            served,
            winner_served,
            cause,
        } => format!(
            "serves {} fewer tokens from cache ({} against {}): {}",
            percent_of(winner_served.saturating_sub(*served), *winner_served),
            grouped(*served),
            grouped(*winner_served),
            served_cause(cause)
        ),
        Loss::LongerTail {
            p99,
            winner_p99,
            cause,
        } => format!(
            "TTFT p99 {p99:.2} s against {winner_p99:.2} s: {}",
            tail_cause(cause)
        ),
        Loss::Imbalance {
            imbalance,
            winner_imbalance,
            busiest,
        } => format!(
            "its busiest replica prefilled {imbalance:.2}× the mean against \
             {winner_imbalance:.2}×: {}",
            busiest_share(busiest.as_ref())
        ),
        Loss::Tie => "ties the winner on every measure; ranked by order simulated".to_owned(),
    }
}

fn served_cause(cause: &ServedCause) -> String {
    match cause {
        ServedCause::RouterReplicas {
            routers,
            served,
            alone_served,
        } => format!(
            "{routers} routers, each with its own index, serve {} fewer tokens than one ({} \
             against {})",
            percent_of(alone_served.saturating_sub(*served), *alone_served),
            grouped(*served),
            grouped(*alone_served),
        ),
        ServedCause::Locality {
            replica_changes,
            winner_replica_changes,
            tokens,
            gap,
        } => format!(
            "it sent {} requests away from their session's previous replica (the winner: {}), \
             which held {} prompt tokens the new one had to prefill ({} of the gap)",
            grouped(*replica_changes),
            grouped(*winner_replica_changes),
            grouped(*tokens),
            percent_of((*tokens).min(*gap), *gap)
        ),
        ServedCause::Mispredicted { tokens, served } => format!(
            "its index predicted {} more hits than the engines served ({} tokens predicted and \
             not served)",
            percent_of(*tokens, *served),
            grouped(*tokens)
        ),
        ServedCause::Evictions {
            evicted,
            winner_evicted,
        } => format!(
            "its replicas evicted {} blocks against {} (the same prefixes cached on several \
             replicas)",
            grouped(*evicted),
            grouped(*winner_evicted)
        ),
        ServedCause::Held {
            lost_locality,
            evicted,
        } => format!(
            "its replicas held fewer of the prefixes its requests reused (lost to locality {}, \
             evicted {} blocks)",
            grouped(*lost_locality),
            grouped(*evicted)
        ),
    }
}

fn tail_cause(cause: &TailCause) -> String {
    match cause {
        TailCause::Spread {
            imbalance,
            winner_imbalance,
            busiest,
        } => format!(
            "its busiest replica prefilled {imbalance:.2}× the mean against \
             {winner_imbalance:.2}× ({})",
            busiest_share(busiest.as_ref())
        ),
        TailCause::MorePrefill {
            computed,
            winner_computed,
            cause,
        } => format!(
            "it prefilled {} more prompt tokens ({} against {}): {}",
            percent_of(computed.saturating_sub(*winner_computed), *winner_computed),
            grouped(*computed),
            grouped(*winner_computed),
            served_cause(cause)
        ),
        TailCause::Queues {
            computed,
            winner_computed,
            imbalance,
            winner_imbalance,
            p95,
            winner_p95,
        } => format!(
            "with {} more prefilled, spread {imbalance:.2}× the mean at most against \
             {winner_imbalance:.2}×, its requests met longer queues in bursts (TTFT p95 \
             {p95:.2} s against {winner_p95:.2} s)",
            percent_of(computed.saturating_sub(*winner_computed), *winner_computed),
        ),
    }
}

/// The busiest replica's requests and share of the tokens prefilled.
fn busiest_share(busiest: Option<&Busiest>) -> String {
    match busiest {
        Some(busiest) => format!(
            "replica {} took {} requests and {} of the tokens prefilled",
            busiest.replica,
            grouped(busiest.requests),
            percent_of(busiest.computed, busiest.total_computed)
        ),
        None => "no replica took a request".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loss_is_worded_with_its_figures() {
        let moved = Loss::FewerServed {
            served: 600,
            winner_served: 1000,
            cause: ServedCause::Locality {
                replica_changes: 8,
                winner_replica_changes: 0,
                tokens: 300,
                gap: 400,
            },
        };
        assert_eq!(
            loss_sentence(&moved),
            "serves 40.0 % fewer tokens from cache (600 against 1,000): it sent 8 requests \
             away from their session's previous replica (the winner: 0), which held 300 \
             prompt tokens the new one had to prefill (75.0 % of the gap)"
        );
        let lopsided = Loss::LongerTail {
            p99: 4.0,
            winner_p99: 1.0,
            cause: TailCause::Spread {
                imbalance: 1.5,
                winner_imbalance: 1.0,
                busiest: Some(Busiest {
                    replica: 1,
                    requests: 5,
                    computed: 900,
                    total_computed: 1200,
                }),
            },
        };
        assert_eq!(
            loss_sentence(&lopsided),
            "TTFT p99 4.00 s against 1.00 s: its busiest replica prefilled 1.50× the mean \
             against 1.00× (replica 1 took 5 requests and 75.0 % of the tokens prefilled)"
        );
        let split = Loss::FewerServed {
            served: 860,
            winner_served: 950,
            cause: ServedCause::RouterReplicas {
                routers: 3,
                served: 860,
                alone_served: 1000,
            },
        };
        assert_eq!(
            loss_sentence(&split),
            "serves 9.5 % fewer tokens from cache (860 against 950): 3 routers, each with \
             its own index, serve 14.0 % fewer tokens than one (860 against 1,000)"
        );
        let believer = Loss::FewerServed {
            served: 800,
            winner_served: 1000,
            cause: ServedCause::Mispredicted {
                tokens: 240,
                served: 800,
            },
        };
        assert_eq!(
            loss_sentence(&believer),
            "serves 20.0 % fewer tokens from cache (800 against 1,000): its index predicted \
             30.0 % more hits than the engines served (240 tokens predicted and not served)"
        );
        assert_eq!(grouped(4_958_720), "4,958,720");
    }
}
