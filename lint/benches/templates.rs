//! `kvlint template` over 100 application prompt templates, as a pre-commit hook runs it:
//! the wall time of the whole process, and its ratio to starting kvlint at all
//! (`kvlint rule`), in the same run. The target is under 0.5 s.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::panic
)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const TEMPLATES: usize = 100;
const TARGET: Duration = Duration::from_millis(500);

fn best_of(runs: usize, args: &[&str], folder: &Path) -> Duration {
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            let status = Command::new(env!("CARGO_BIN_EXE_kvlint"))
                .args(args)
                .current_dir(folder)
                .output()
                .unwrap()
                .status;
            assert!(status.code().is_some_and(|code| code <= 1));
            start.elapsed()
        })
        .min()
        .unwrap()
}

fn main() {
    let folder = std::env::temp_dir().join(format!("kvlint-template-bench-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let policy = "Answer in the house style: short sentences, no marketing language, cite the policy section. ".repeat(20);
    for index in 0..TEMPLATES {
        let (name, text) = match index % 4 {
            0 => (
                format!("t{index}.j2"),
                format!("{policy}\n{{{{ question }}}}\nTime: {{{{ now }}}}\n"),
            ),
            1 => (
                format!("t{index}.j2"),
                format!("Time: {{{{ now }}}}\n{policy}\n{{{{ question }}}}\n"),
            ),
            2 => (
                format!("t{index}.prompt"),
                format!("Request {{request_id}}.\n{policy}\n{{question}}\n"),
            ),
            _ => (
                format!("t{index}.hbs"),
                format!("{policy}\n{{{{user}}}} asks: {{{{question}}}}\n"),
            ),
        };
        std::fs::write(folder.join(name), text).unwrap();
    }
    let startup = best_of(5, &["rule"], &folder);
    let check = best_of(5, &["template", "--format", "json", "."], &folder);
    std::fs::remove_dir_all(&folder).ok();
    println!(
        "kvlint template on {TEMPLATES} prompt templates: {:.0} ms ({:.1}× starting kvlint, {:.0} ms); target < {} ms",
        check.as_secs_f64() * 1000.0,
        check.as_secs_f64() / startup.as_secs_f64(),
        startup.as_secs_f64() * 1000.0,
        TARGET.as_millis(),
    );
    if check > TARGET {
        println!("performance target missed");
        std::process::exit(1);
    }
}
