//! Traces on disk: built once per set of sessions, renderer and block size, read back by every
//! later `kvlint workload` or `kvlint simulate` of the same inputs. A file holds one trace in a
//! small binary form (little-endian), named by the blake3 hash of what it was built from;
//! it is written to a temporary file and renamed into place, so a reader never sees half of one.

use std::io::{BufReader, BufWriter, Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::error::TraceFileError;
use kvlint_fleet::{Trace, TraceRequest, TraceSession};

/// The first bytes of a trace file, with the format's version.
const MAGIC: &[u8; 8] = b"KVLTRC02";

/// The key of a trace: the inputs' contents, the renderer and the block size.
pub fn trace_key(inputs: &[(String, &[u8])], renderer: &str, block_size: u32) -> String {
    let mut hasher = blake3::Hasher::new();
    hasher.update(MAGIC);
    hasher.update(env!("CARGO_PKG_VERSION").as_bytes());
    hasher.update(renderer.as_bytes());
    hasher.update(&block_size.to_le_bytes());
    for (name, bytes) in inputs {
        hasher.update(&(name.len() as u64).to_le_bytes());
        hasher.update(name.as_bytes());
        hasher.update(&(bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    }
    hasher.finalize().to_hex()[..32].to_owned()
}

/// Where the trace of `key` lives in `folder`.
pub fn trace_path(folder: &Path, key: &str) -> PathBuf {
    folder.join(format!("{key}.trace"))
}

/// Writes `trace` to `path`.
pub fn save(trace: &Trace, path: &Path) -> Result<(), TraceFileError> {
    let error = |reason: String| TraceFileError {
        path: path.to_owned(),
        reason,
    };
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder).map_err(|io| error(io.to_string()))?;
    }
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    let file = std::fs::File::create(&temporary).map_err(|io| error(io.to_string()))?;
    let mut out = BufWriter::new(file);
    write_trace(trace, &mut out).map_err(|io| error(io.to_string()))?;
    out.flush().map_err(|io| error(io.to_string()))?;
    drop(out);
    std::fs::rename(&temporary, path).map_err(|io| {
        let _ = std::fs::remove_file(&temporary);
        error(io.to_string())
    })
}

/// Reads the trace at `path`.
pub fn load(path: &Path) -> Result<Trace, TraceFileError> {
    let file = std::fs::File::open(path).map_err(|io| TraceFileError {
        path: path.to_owned(),
        reason: io.to_string(),
    })?;
    read_trace(&mut BufReader::new(file)).map_err(|reason| TraceFileError {
        path: path.to_owned(),
        reason,
    })
}

fn write_trace(trace: &Trace, out: &mut impl Write) -> std::io::Result<()> {
    out.write_all(MAGIC)?;
    write_u32(out, trace.block_size)?;
    write_text(out, &trace.renderer)?;
    write_u64(out, trace.rules.len() as u64)?;
    for rule in &trace.rules {
        write_text(out, rule)?;
    }
    write_u64(out, trace.sessions.len() as u64)?;
    for session in &trace.sessions {
        write_text(out, &session.identity)?;
        write_range(out, &session.requests)?;
    }
    write_u64(out, trace.requests.len() as u64)?;
    for request in &trace.requests {
        write_u32(out, request.session)?;
        write_u64(out, request.time.map_or(u64::MAX, f64::to_bits))?;
        for value in [
            request.input_tokens,
            request.output_tokens,
            request.shared_with_previous,
            request.shared_with_previous_sequence,
            request.previous_input_tokens,
            request.kept_blocks,
            request.finding.map_or(u32::MAX, u32::from),
        ] {
            write_u32(out, value)?;
        }
        write_range(out, &request.new_blocks)?;
        write_range(out, &request.generated_blocks)?;
    }
    write_u64(out, trace.blocks.len() as u64)?;
    for block in &trace.blocks {
        write_u64(out, *block)?;
    }
    Ok(())
}

fn read_trace(input: &mut impl Read) -> Result<Trace, String> {
    let mut magic = [0u8; 8];
    input.read_exact(&mut magic).map_err(|io| io.to_string())?;
    if &magic != MAGIC {
        return Err("not a kvlint trace of this version".into());
    }
    let block_size = read_u32(input)?;
    let renderer = read_text(input)?;
    let rules = (0..read_count(input)?)
        .map(|_| read_text(input))
        .collect::<Result<Vec<_>, _>>()?;
    let sessions = (0..read_count(input)?)
        .map(|_| {
            Ok(TraceSession {
                identity: read_text(input)?,
                requests: read_range(input)?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let requests = (0..read_count(input)?)
        .map(|_| {
            let session = read_u32(input)?;
            let time = read_u64(input)?;
            let mut values = [0u32; 7];
            for value in &mut values {
                *value = read_u32(input)?;
            }
            Ok(TraceRequest {
                session,
                time: (time != u64::MAX).then(|| f64::from_bits(time)),
                input_tokens: values[0],
                output_tokens: values[1],
                shared_with_previous: values[2],
                shared_with_previous_sequence: values[3],
                previous_input_tokens: values[4],
                kept_blocks: values[5],
                finding: u16::try_from(values[6]).ok(),
                new_blocks: read_range(input)?,
                generated_blocks: read_range(input)?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let blocks = (0..read_count(input)?)
        .map(|_| read_u64(input))
        .collect::<Result<Vec<_>, _>>()?;
    // References stay inside the file's own lists.
    let valid = requests.iter().all(|request| {
        (request.session as usize) < sessions.len()
            && request.new_blocks.end as usize <= blocks.len()
            && request.generated_blocks.end as usize <= blocks.len()
            && request.new_blocks.start <= request.new_blocks.end
            && request.generated_blocks.start <= request.generated_blocks.end
    }) && sessions.iter().all(|session| {
        session.requests.start <= session.requests.end
            && session.requests.end as usize <= requests.len()
    });
    if !valid {
        return Err("a reference out of range: the file is damaged".into());
    }
    Ok(Trace {
        block_size,
        renderer,
        sessions,
        requests,
        blocks,
        rules,
    })
}

fn write_u32(out: &mut impl Write, value: u32) -> std::io::Result<()> {
    out.write_all(&value.to_le_bytes())
}

fn write_u64(out: &mut impl Write, value: u64) -> std::io::Result<()> {
    out.write_all(&value.to_le_bytes())
}

fn write_text(out: &mut impl Write, text: &str) -> std::io::Result<()> {
    write_u64(out, text.len() as u64)?;
    out.write_all(text.as_bytes())
}

fn write_range(out: &mut impl Write, range: &Range<u32>) -> std::io::Result<()> {
    write_u32(out, range.start)?;
    write_u32(out, range.end)
}

fn read_u32(input: &mut impl Read) -> Result<u32, String> {
    let mut bytes = [0u8; 4];
    input.read_exact(&mut bytes).map_err(|io| io.to_string())?;
    Ok(u32::from_le_bytes(bytes))
}

fn read_u64(input: &mut impl Read) -> Result<u64, String> {
    let mut bytes = [0u8; 8];
    input.read_exact(&mut bytes).map_err(|io| io.to_string())?;
    Ok(u64::from_le_bytes(bytes))
}

/// A count of items that follow: refused when larger than a file could hold, so that a
/// damaged count cannot make the reader reserve memory without end.
fn read_count(input: &mut impl Read) -> Result<usize, String> {
    let count = read_u64(input)?;
    usize::try_from(count)
        .ok()
        .filter(|count| *count < 1 << 36)
        .ok_or_else(|| format!("a count of {count}: the file is damaged"))
}

fn read_text(input: &mut impl Read) -> Result<String, String> {
    let length = read_count(input)?;
    let mut bytes = Vec::new();
    input
        .take(length as u64)
        .read_to_end(&mut bytes)
        .map_err(|io| io.to_string())?;
    if bytes.len() != length {
        return Err("the file ends early".into());
    }
    String::from_utf8(bytes).map_err(|error| error.to_string())
}

fn read_range(input: &mut impl Read) -> Result<Range<u32>, String> {
    Ok(read_u32(input)?..read_u32(input)?)
}
