//! The input files commands read: session files always; recordings (VCR cassettes, HAR files,
//! Inspect logs, OTLP traces) and compressed files through `kvlint-recordings`, with the
//! default `recordings` feature. Without it, a file is read as one session file.

#[cfg(feature = "recordings")]
pub use kvlint_recordings::{input_text, parse_all, read_all, read_input, read_session};

#[cfg(not(feature = "recordings"))]
pub use session_files_only::{input_text, parse_all, read_all, read_input, read_session};

#[cfg(not(feature = "recordings"))]
mod session_files_only {
    use std::path::Path;
    use std::sync::Arc;

    use kvlint_core::error::{InputError, utf8_text};
    use kvlint_core::session::{SessionFile, read_text};

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
