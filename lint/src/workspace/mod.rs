//! The workspace: what the command line and the language server both stand on, as ruff's
//! server stands on its workspace crate and never on its CLI. `config` finds and reads the
//! configuration that applies to a file, `discover` the files a folder holds, `render` the
//! render settings (the flags the commands and `kvlint lsp` share), and `check` the one setup
//! and check of a session or a template under its configuration. It never names a command:
//! `commands/` and `lsp/` both import from here, never from each other.

pub mod check;
pub mod config;
pub mod discover;
pub mod render;
