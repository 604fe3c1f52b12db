//! Bounds on what one render of a chat template may cost. A template comes from a pull request
//! as much as a session does: a loop of loops, a string doubled in a loop or a `tojson` with an
//! indent of a billion must end as an input error naming the template line, never as a hang
//! or an abort.
//!
//! Work and memory are bounded by minijinja's fuel: one unit per instruction and one per 64
//! bytes of data the template creates (output, strings, lists), paid before a value is made
//! when its size is known; kvlint's own filters pay for what they write the same way. The text
//! a template prints through `{{ … }}` is capped relative to the conversation it renders.
//! Nesting (loops, conditions, macro calls) is bounded by minijinja's recursion limit.

use std::cell::Cell;

use minijinja::{Error as JinjaError, ErrorKind, State};

/// Bounds on one render of a chat template. The defaults leave every real template (the whole
/// llama.cpp collection) far inside them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TemplateLimits {
    /// Fuel per render: instructions, plus one per 64 bytes of data created. Also bounds the
    /// memory a render allocates, to about 64 bytes per unit.
    pub fuel: u64,
    /// Printed output per byte of the conversation given (messages and tools)…
    pub output_per_input_byte: usize,
    /// …plus this many bytes.
    pub output_headroom: usize,
    /// Nesting depth: minijinja counts one per loop or condition, ten or more per macro call
    /// or include; at most 500, the depth minijinja knows to be safe on a thread's stack.
    pub recursion: usize,
}

impl Default for TemplateLimits {
    fn default() -> Self {
        Self {
            // About half a second of work, or about 640 MB of data.
            fuel: 10_000_000,
            output_per_input_byte: 16,
            output_headroom: 1 << 20,
            recursion: Self::MAX_RECURSION,
        }
    }
}

impl TemplateLimits {
    /// The deepest nesting minijinja renders without risking a thread's stack (without its
    /// `stacker` feature it caps any higher limit here).
    pub const MAX_RECURSION: usize = 500;

    /// The printed output allowed for a conversation of `input_bytes`.
    pub fn output_cap(&self, input_bytes: usize) -> usize {
        input_bytes
            .saturating_mul(self.output_per_input_byte)
            .saturating_add(self.output_headroom)
    }
}

/// The error of a template that printed more than its cap.
#[derive(Debug, thiserror::Error)]
#[error(
    "the template printed more than {cap} bytes for a conversation of {input_bytes} bytes (the limit is {per_byte}× plus {headroom} bytes)"
)]
pub(super) struct OutputCapExceeded {
    pub cap: usize,
    pub input_bytes: usize,
    pub per_byte: usize,
    pub headroom: usize,
}

thread_local! {
    /// What the render running on this thread may still print, and its limits. A render runs
    /// on the thread that starts it, start to end.
    static OUTPUT_LEFT: Cell<Option<OutputBudget>> = const { Cell::new(None) };
}

#[derive(Clone, Copy)]
struct OutputBudget {
    left: usize,
    input_bytes: usize,
    limits: TemplateLimits,
}

/// Caps what templates print on this thread until dropped.
pub(super) struct OutputCap {
    previous: Option<OutputBudget>,
}

impl OutputCap {
    pub(super) fn set(limits: TemplateLimits, input_bytes: usize) -> Self {
        let budget = OutputBudget {
            left: limits.output_cap(input_bytes),
            input_bytes,
            limits,
        };
        Self {
            previous: OUTPUT_LEFT.replace(Some(budget)),
        }
    }
}

impl Drop for OutputCap {
    fn drop(&mut self) {
        OUTPUT_LEFT.set(self.previous);
    }
}

/// Counts `bytes` printed against the cap of the render running on this thread.
pub(super) fn print(bytes: usize) -> Result<(), JinjaError> {
    let Some(mut budget) = OUTPUT_LEFT.get() else {
        return Ok(());
    };
    let Some(left) = budget.left.checked_sub(bytes) else {
        let exceeded = OutputCapExceeded {
            cap: budget.limits.output_cap(budget.input_bytes),
            input_bytes: budget.input_bytes,
            per_byte: budget.limits.output_per_input_byte,
            headroom: budget.limits.output_headroom,
        };
        return Err(
            JinjaError::new(ErrorKind::InvalidOperation, exceeded.to_string())
                .with_source(exceeded),
        );
    };
    budget.left = left;
    OUTPUT_LEFT.set(Some(budget));
    Ok(())
}

/// Pays, before making it, for a value of `bytes` that a filter is about to create.
pub(super) fn pay_for(state: &State, bytes: usize) -> Result<(), JinjaError> {
    let units = u64::try_from(bytes / 64).unwrap_or(u64::MAX);
    if units == 0 {
        return Ok(());
    }
    state.consume_fuel(units)
}
