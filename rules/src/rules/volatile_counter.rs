
use kvlint_core::prompt_template::Volatility;

use crate::volatile::{VolatileClass, placement_finding};
use crate::{Finding, Rule, RuleInput, RuleMeta, declare_rule};

declare_rule! {
    /// ## What it does
    /// Finds a number that steps from turn to turn inside content the next turn sends
    /// again: a step budget, tokens used, "N turns left", a retry count.
    ///
    /// ## Why is this bad?
    /// A counter in the system prompt or in an earlier message changes every turn, and the
    /// engine recomputes everything after it. Budgets and usage meters are often put at the
    /// top "so the model sees them", which costs a full prefill per turn.
    ///
    /// ## Example
    /// ```python
    /// system = f"You have {max_steps - step} steps left.\n" + INSTRUCTIONS
    /// ```
    ///
    /// ## Use instead
    /// Put per-turn numbers at the end of the newest message, where the next turn drops them:
    /// ```python
    /// messages[-1]["content"] += f"\n\n({max_steps - step} steps left)"
    /// ```
    pub struct VolatileCounter {
        name: "volatile-counter",
        code: "KV103",
        summary: "a number that steps every turn sits inside the cached prefix",
    }
}

impl Rule for VolatileCounter {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        match *input {
            RuleInput::TurnPair(pair) => VolatileClass::Counter
                .explains(pair)
                .then(|| Finding::of_pair(pair, &format!("a counter changes in `{}`", pair.divergence.part), "put budgets, usage and step counts at the end of the newest message, not in the system prompt or history")),
            RuleInput::Placement { placement, .. }
                if matches!(placement.volatility, Volatility::Counter | Volatility::Configured) =>
            {
                Some(placement_finding(placement))
            }
            _ => None,
        }
    }
}
