//! ARCHITECTURE.md is the map a newcomer reads first, so it is held to the tree: it names
//! every workspace member (its folder and its package), every command `kvlint --help` lists,
//! and every file or folder of the repository it points to exists.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

/// A workspace member as the root `Cargo.toml` lists it.
struct Member {
    /// `protocol`
    folder: String,
    /// `kvlint-protocol`
    package: String,
}

fn architecture() -> String {
    let path = kvlint_fixtures::repository().join("ARCHITECTURE.md");
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn manifest(path: &Path) -> toml::Table {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    toml::from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// The members of the root `Cargo.toml`'s `[workspace]`, each with its package's name.
fn workspace_members() -> Vec<Member> {
    let root = kvlint_fixtures::repository();
    let workspace = manifest(&root.join("Cargo.toml"));
    workspace["workspace"]["members"]
        .as_array()
        .expect("[workspace] members in the root Cargo.toml")
        .iter()
        .map(|member| {
            let folder = member.as_str().expect("a member is a folder").to_owned();
            let package = manifest(&root.join(&folder).join("Cargo.toml"))["package"]["name"]
                .as_str()
                .expect("a member's package name")
                .to_owned();
            Member { folder, package }
        })
        .collect()
}

/// The commands `kvlint --help` lists (`help` aside), as a user sees them.
fn commands() -> Vec<String> {
    let run = kvlint_fixtures::run_kvlint(env!("CARGO_BIN_EXE_kvlint"), &["--help"]);
    assert_eq!(run.code, 0, "kvlint --help: {}", run.stderr);
    run.stdout
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        // A wrapped description continues further in; a command starts at two spaces.
        .filter(|line| !line[2..].starts_with(' '))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|command| *command != "help")
        .map(str::to_owned)
        .collect()
}

/// What `document` leaves out: each member whose folder (`protocol/`) or package
/// (`kvlint-protocol`) it does not name in backticks, and each command it does not name as
/// `kvlint COMMAND`.
fn left_out(document: &str, members: &[Member], commands: &[String]) -> Vec<String> {
    let mut missing = Vec::new();
    for member in members {
        for name in [
            format!("`{}/`", member.folder),
            format!("`{}`", member.package),
        ] {
            if !document.contains(&name) {
                missing.push(format!("the workspace member {name}"));
            }
        }
    }
    for command in commands {
        let name = format!("`kvlint {command}`");
        if !document.contains(&name) {
            missing.push(format!("the command {name}"));
        }
    }
    missing
}

/// The repository paths `document` names in inline code (`core/src/diff.rs`, `docs/rules/`):
/// those under one of the repository's top-level folders, patterns (`<name>`, `{fail,pass}`)
/// left out. Fenced blocks are pictures, not references.
fn named_paths(document: &str, top_level: &[String]) -> Vec<String> {
    let mut in_fence = false;
    let prose: String = document
        .lines()
        .filter(|line| {
            if line.starts_with("```") {
                in_fence = !in_fence;
                return false;
            }
            !in_fence
        })
        .collect::<Vec<_>>()
        .join("\n");
    prose
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|code| {
            code.chars()
                .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
        })
        .filter(|code| {
            code.split_once('/')
                .is_some_and(|(first, _)| top_level.iter().any(|folder| folder == first))
        })
        .map(str::to_owned)
        .collect()
}

fn top_level_folders() -> Vec<String> {
    std::fs::read_dir(kvlint_fixtures::repository())
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.file_type().unwrap().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.') && name != "target")
        .collect()
}

#[test]
fn architecture_names_every_workspace_member_and_command() {
    let members = workspace_members();
    let commands = commands();
    // A sanity floor: an empty list would make the check vacuous.
    assert!(members.len() >= 9, "members read: {}", members.len());
    assert!(
        commands.len() >= 12 && commands.iter().any(|command| command == "check"),
        "commands read from kvlint --help: {commands:?}"
    );
    let missing = left_out(&architecture(), &members, &commands);
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not name {}: give each its place on the map (its crate's one job \
         and invariant, or its row in the commands table)",
        missing.join(", ")
    );
}

#[test]
fn every_path_architecture_names_exists() {
    let root = kvlint_fixtures::repository();
    let paths = named_paths(&architecture(), &top_level_folders());
    assert!(paths.len() >= 20, "paths read: {paths:?}");
    let gone: Vec<&String> = paths
        .iter()
        .filter(|path| !root.join(path).exists())
        .collect();
    assert!(
        gone.is_empty(),
        "ARCHITECTURE.md names paths that are not in the tree: {gone:?}"
    );
}

#[test]
fn a_map_without_a_crate_or_a_command_is_caught() {
    let members = workspace_members();
    let commands = commands();
    let document = architecture()
        .replace("`recordings/`", "")
        .replace("`kvlint simulate`", "");
    assert_eq!(
        left_out(&document, &members, &commands),
        [
            "the workspace member `recordings/`",
            "the command `kvlint simulate`"
        ]
    );
}

/// The top-level modules of `crate` (`fleet`): each file and folder under its `src/` but the
/// crate root.
fn modules(crate_folder: &str) -> Vec<String> {
    let source = kvlint_fixtures::repository().join(crate_folder).join("src");
    let mut modules: Vec<String> = std::fs::read_dir(&source)
        .unwrap()
        .map(|entry| entry.unwrap())
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().unwrap().is_dir() {
                format!("{name}/")
            } else {
                name
            }
        })
        .filter(|name| name != "lib.rs")
        .collect();
    modules.sort();
    modules
}

#[test]
fn architecture_names_every_module_of_the_fleet_wing_and_every_router() {
    let document = architecture();
    let mut missing = Vec::new();
    for crate_folder in ["fleet", "workload"] {
        let modules = modules(crate_folder);
        assert!(modules.len() >= 5, "{crate_folder}: {modules:?}");
        for module in modules {
            // Named as the crate's section names it (`trace.rs`, `cache/`) or by its path.
            let named = [
                format!("`{module}"),
                format!("`{crate_folder}/src/{module}"),
            ];
            if !named.iter().any(|name| document.contains(name)) {
                missing.push(format!("{crate_folder}/src/{module}"));
            }
        }
    }
    let routers = kvlint_fleet::Policy::named();
    assert!(routers.len() >= 8, "named routers: {}", routers.len());
    for router in routers {
        let name = format!("`{router}`");
        if !document.contains(&name) {
            missing.push(format!("the router {name}"));
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not name: {}",
        missing.join(", ")
    );
}

/// Arrows point down: the language server and the commands stand on the workspace layer and
/// never import each other; the workspace imports neither.
#[test]
fn the_language_server_and_the_commands_never_import_each_other() {
    fn rust_files(folder: &Path, found: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, found);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                found.push(path);
            }
        }
    }
    let source = kvlint_fixtures::repository().join("lint/src");
    let mut sideways = Vec::new();
    for (folder, others) in [
        ("lsp", &["crate::commands"][..]),
        ("commands", &["crate::lsp"][..]),
        ("workspace", &["crate::commands", "crate::lsp"][..]),
    ] {
        let mut files = Vec::new();
        rust_files(&source.join(folder), &mut files);
        assert!(!files.is_empty(), "lint/src/{folder}");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for other in others {
                if text.contains(other) {
                    sideways.push(format!("{} names {other}", file.display()));
                }
            }
        }
    }
    assert!(sideways.is_empty(), "{sideways:?}");
}

/// Every source file of the house (Rust, TypeScript, Python) is at most 600 lines.
#[test]
fn every_source_file_is_at_most_600_lines() {
    fn walk(folder: &Path, long: &mut Vec<String>, seen: &mut usize) {
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with('.') || ["target", "node_modules", "dist"].contains(&name.as_str())
            {
                continue;
            }
            if path.is_dir() {
                walk(&path, long, seen);
            } else if path
                .extension()
                .is_some_and(|extension| ["rs", "ts", "py"].iter().any(|e| extension == *e))
            {
                *seen += 1;
                let lines = std::fs::read_to_string(&path).unwrap().lines().count();
                if lines > 600 {
                    long.push(format!("{} ({lines} lines)", path.display()));
                }
            }
        }
    }
    let (mut long, mut seen) = (Vec::new(), 0);
    walk(&kvlint_fixtures::repository(), &mut long, &mut seen);
    assert!(seen > 300, "{seen} source files");
    assert!(long.is_empty(), "over 600 lines: {long:?}");
}
