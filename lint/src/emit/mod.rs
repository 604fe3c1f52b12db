//! Emitters: each renders the same [`Report`](crate::report::Report) in one output format.

pub mod human;
pub mod json;

use clap::ValueEnum;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Findings with the place in the file, the diverging tokens and a help line.
    Human,
    /// The JSON report, version 1.
    Json,
}
