//! The `kvlint` binary: [`kvlint::run`] on the process's arguments.

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(kvlint::run(std::env::args_os()))
}
