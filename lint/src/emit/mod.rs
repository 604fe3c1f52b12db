//! Emitters: each renders the same [`Report`](crate::report::Report) in one output format.

pub mod github;
pub mod human;
pub mod json;
pub mod junit;
pub mod sarif;

use clap::ValueEnum;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Findings with the place in the file, the diverging tokens and a help line.
    Human,
    /// The JSON report, version 1.
    Json,
    /// SARIF 2.1.0, for GitHub code scanning and other static-analysis viewers.
    Sarif,
    /// GitHub Actions workflow commands: one annotation per finding.
    Github,
    /// JUnit XML: a test suite per session, a test case per turn.
    Junit,
}
