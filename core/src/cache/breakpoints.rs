//! Anthropic cache breakpoints: where a request's marked blocks end, and the audit of each
//! turn's breakpoints against the model minimum and the turn after it.

use super::turn::CacheTurn;
use kvlint_request::path::PartPath;

pub use kvlint_protocol::{ANTHROPIC_LOOKBACK_BLOCKS, ANTHROPIC_MAX_BREAKPOINTS};

/// The positions of a request's breakpoints: the marked blocks, and the last block for the
/// automatic form. The request counts every marked block, even past the fourth.
pub(super) fn anthropic_breakpoints(turn: &CacheTurn) -> Vec<usize> {
    let mut positions: Vec<usize> = turn
        .breakpoint_blocks
        .iter()
        .filter_map(|block| turn.block_ends.get(*block).copied())
        .collect();
    positions.sort_unstable();
    positions.dedup();
    positions
}

/// A problem with a turn's Anthropic cache breakpoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BreakpointIssue {
    /// The turn whose request carries the breakpoint.
    pub turn: usize,
    pub block: PartPath,
    /// Tokens up to the end of the marked block.
    pub position: usize,
    pub kind: BreakpointIssueKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BreakpointIssueKind {
    /// More breakpoints than the API accepts: it rejects the request.
    TooMany { count: usize },
    /// The prefix up to the breakpoint is shorter than the model caches.
    BelowMinimum { minimum: usize },
    /// The next turn changes content before the breakpoint: what it wrote is never read.
    /// `written` is what the engine model has this turn write to the cache up to the
    /// breakpoint that no later read covers: past what the turn read from cache and past
    /// its own furthest entry the next turn reads. Billed at the write price for nothing.
    AfterVolatile {
        next_turn_diverges_at: usize,
        written: usize,
    },
    /// The next turn keeps the prefix but none of its breakpoints is within 20 blocks after
    /// this one, so the entry is not found.
    BeyondLookback { blocks: usize },
    /// The next turn has no breakpoint at or after this one.
    Unread,
}

/// Audits each turn's breakpoints against the model minimum and the turn after it.
/// `common_with_next[i]` is the number of leading tokens turn `i+1` shares with turn `i`;
/// `cached[i]` the tokens the engine model serves turn `i` from cache.
pub fn audit_breakpoints(
    turns: &[CacheTurn],
    common_with_next: &[usize],
    cached: &[usize],
    minimum: usize,
) -> Vec<BreakpointIssue> {
    let mut issues = Vec::new();
    for (index, turn) in turns.iter().enumerate() {
        let marked: Vec<(usize, usize)> = turn
            .breakpoint_blocks
            .iter()
            .filter_map(|block| turn.block_ends.get(*block).map(|end| (*block, *end)))
            .collect();
        let issue = |block: usize, position: usize, kind| BreakpointIssue {
            turn: index,
            block: turn.block_paths.get(block).cloned().unwrap_or_default(),
            position,
            kind,
        };
        if marked.len() > ANTHROPIC_MAX_BREAKPOINTS {
            let (block, position) = marked[ANTHROPIC_MAX_BREAKPOINTS];
            issues.push(issue(
                block,
                position,
                BreakpointIssueKind::TooMany {
                    count: marked.len(),
                },
            ));
        }
        let next = turns.get(index + 1).zip(common_with_next.get(index));
        for &(block, position) in &marked {
            if position < minimum {
                issues.push(issue(
                    block,
                    position,
                    BreakpointIssueKind::BelowMinimum { minimum },
                ));
                continue;
            }
            let Some((next, &common)) = next else {
                continue;
            };
            if position > common {
                // Written past what the turn read and past the furthest entry it also writes
                // that the next turn can read.
                let read = marked
                    .iter()
                    .map(|(_, end)| *end)
                    .filter(|end| *end >= minimum && *end <= common)
                    .chain(cached.get(index).copied())
                    .max()
                    .unwrap_or_default();
                issues.push(issue(
                    block,
                    position,
                    BreakpointIssueKind::AfterVolatile {
                        next_turn_diverges_at: common,
                        written: position.saturating_sub(read),
                    },
                ));
                continue;
            }
            // The block of the next turn that ends where this one did.
            let Some(same_block) = next.block_ends.iter().position(|end| *end == position) else {
                continue;
            };
            let reach = next
                .breakpoint_blocks
                .iter()
                .filter(|later| **later >= same_block)
                .map(|later| later - same_block)
                .min();
            match reach {
                None => issues.push(issue(block, position, BreakpointIssueKind::Unread)),
                Some(blocks) if blocks >= ANTHROPIC_LOOKBACK_BLOCKS => {
                    issues.push(issue(
                        block,
                        position,
                        BreakpointIssueKind::BeyondLookback { blocks },
                    ));
                }
                Some(_) => {}
            }
        }
    }
    issues
}
