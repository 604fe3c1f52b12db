//! The input files commands read: session files always; recordings (VCR cassettes, HAR files,
//! Inspect logs, OTLP traces) and compressed files through `kvlint-recordings`, with the
//! default `recordings` feature. Without it, a file is read as one session file.

#[cfg(feature = "recordings")]
pub use kvlint_recordings::{input_text, parse_all, read_all, read_input, read_session};
use kvlint_request::error::InputError;

#[cfg(not(feature = "recordings"))]
pub use session_files_only::{input_text, parse_all, read_all, read_input, read_session};

#[cfg(not(feature = "recordings"))]
mod session_files_only {
    use std::path::Path;
    use std::sync::Arc;

    use kvlint_core::session::{SessionFile, read_text};
    use kvlint_request::error::{InputError, utf8_text};

    pub fn read_input(path: &Path) -> Result<String, InputError> {
        read_text(path)
    }

    pub fn input_text(display: String, bytes: Vec<u8>) -> Result<String, InputError> {
        utf8_text(display, bytes)
    }

    pub fn read_session(path: &Path) -> Result<SessionFile, InputError> {
        SessionFile::read(path)
    }

    pub fn parse_all(path: String, text: Arc<str>) -> Result<Vec<SessionFile>, InputError> {
        SessionFile::parse(path, text).map(|session| vec![session])
    }

    pub fn read_all(path: &Path) -> Result<Vec<SessionFile>, InputError> {
        read_session(path).map(|session| vec![session])
    }
}

/// An input error in the command line's words: the library's help names the concept, this
/// names the commands (`kvlint import`, `kvlint check`). Any other error is unchanged.
pub fn in_command_words(error: miette::Report) -> miette::Report {
    match error.downcast::<InputError>() {
        Ok(input @ (InputError::Recording { .. } | InputError::NotOneRequest { .. })) => {
            miette::Report::new(CommandHelp(input))
        }
        Ok(input) => miette::Report::new(input),
        Err(error) => error,
    }
}

/// An [`InputError`] shown as it is, with the command line's help.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct CommandHelp(InputError);

impl miette::Diagnostic for CommandHelp {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.0.code()
    }

    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        let help = match &self.0 {
            InputError::Recording { path, .. } => format!(
                "`kvlint check`, `kvlint render` and `kvlint probe` read recordings; `kvlint \
                 import {path} --out DIR` writes the sessions it holds as session files"
            ),
            InputError::NotOneRequest { .. } => {
                "`kvlint diff` compares two single requests; use `kvlint check` for a session"
                    .to_owned()
            }
            _ => return self.0.help(),
        };
        Some(Box::new(help))
    }
}
