//! A Mooncake trace read as it goes, for a simulation of millions of requests: the file is
//! looked over once ([`StreamedTrace::open`]), then each run reads it line by line
//! ([`StreamedTrace::replay`]) holding only the sessions in flight, never the whole trace.
//!
//! A trace can be read so when its lines are in the order they were sent: each has a time
//! (a `timestamp`, or a `delay` after its session's previous line) and no line is earlier than
//! the one before. The requests then reach the fleet exactly as they do from the trace held
//! whole ([`super::read_hashed`]): the same sessions, numbered in order of first appearance,
//! the same blocks, and requests sent at the same time in the order of their sessions' first
//! lines (as the whole trace orders them), so every figure of a run is the same.
//!
//! The look-over keeps, while it reads, each session's last line and time (a line without a
//! `session_id` is a session of its own and costs nothing), then one bit per line: whether the
//! line is its session's last, after which the fleet forgets the session.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::mpsc::SyncSender;

use super::mooncake::Line;
use super::{HashedFormat, HashedTraceError, PreviousIds, check_ids, detect};
use crate::trace::{SessionChain, TraceRequest};

/// A Mooncake trace in time order, to be read as it goes.
#[derive(Clone, Debug)]
pub struct StreamedTrace {
    path: PathBuf,
    /// The file as errors name it.
    name: String,
    /// Tokens per block id.
    pub block_size: u32,
    /// The lines that end their session, one bit per line (from line 1 at bit 1).
    last_of_session: Vec<u64>,
    /// The first request's time, in seconds: a run's time 0.
    origin: f64,
    /// Requests in the file.
    pub requests: usize,
}

/// One request of a streamed trace as a run meets it.
pub struct StreamedRequest<'a> {
    /// Seconds since the trace's first request.
    pub time: f64,
    /// Its line in the file: its number in the run.
    pub line: usize,
    pub request: &'a TraceRequest,
    /// Its session: its `session_id`, else `file:line`.
    pub identity: &'a str,
    /// Its prompt's blocks after those it keeps from its session's previous request.
    pub new_blocks: &'a [u64],
    /// Whether no later line is of its session.
    pub last: bool,
}

/// What a session in flight keeps while the trace is read.
struct Flight {
    number: u32,
    ids: PreviousIds,
    chain: SessionChain,
    last_time: Option<f64>,
}

/// Requests read, handed over from the reading thread to the run's in batches, each time's
/// in their sessions' order.
#[derive(Default)]
struct Batch {
    /// (time, line, request, identity, last), in the order a run serves them.
    entries: Vec<(f64, usize, TraceRequest, String, bool)>,
    /// The requests' new blocks (`TraceRequest::new_blocks` are ranges in it).
    blocks: Vec<u64>,
    /// Where the requests of the last time read begin.
    same_time: usize,
}

/// Requests a batch holds before it is handed over (more when many share a time).
const BATCH_REQUESTS: usize = 1024;

/// Batches read ahead of the run at most.
const BATCHES_AHEAD: usize = 4;

impl StreamedTrace {
    /// Looks the trace at `path` over; `None` when it is not one to read as it goes (another
    /// format than Mooncake's, a line without a time, a line earlier than the one before), to
    /// be read whole instead. `format` and `block_size` as [`super::read_hashed`] takes them.
    pub fn open(
        path: &Path,
        format: Option<HashedFormat>,
        block_size: Option<u32>,
    ) -> Result<Option<Self>, HashedTraceError> {
        let name = path.display().to_string();
        let mut format = format;
        let mut sessions: HashMap<String, (usize, Option<f64>)> = HashMap::new();
        let mut last_of_session = Vec::new();
        let mut origin = None;
        let mut previous_time = f64::NEG_INFINITY;
        let mut requests = 0usize;
        let mut in_order = true;
        let mut too_many_ids = None;
        for_each_line(path, &name, |line, content| {
            let format = match format {
                Some(format) => format,
                None => *format.insert(
                    detect(content)
                        .ok_or_else(|| HashedTraceError::Unknown { path: name.clone() })?,
                ),
            };
            if !matches!(
                format,
                HashedFormat::Mooncake | HashedFormat::MooncakeAgentic
            ) {
                in_order = false;
                return Ok(false);
            }
            let fields = Line::parse(&name, line, content)?;
            let time = match &fields.session_id {
                Some(session) => {
                    let (last_line, last_time) =
                        sessions.entry(session.clone()).or_insert((line, None));
                    *last_line = line;
                    fields.time(last_time)
                }
                None => {
                    set_bit(&mut last_of_session, line);
                    fields.time(&mut None)
                }
            };
            // The ids are checked here, so that a run meets no bad line; a line that is not
            // one is named first, as when the trace is read whole.
            let request = fields.request(String::new(), time, line);
            let size = block_size.unwrap_or(format.default_block_size()).max(1);
            if too_many_ids.is_none() {
                too_many_ids = check_ids(&name, &request, size).err();
            }
            requests += 1;
            match time {
                Some(time) if time >= previous_time => {
                    previous_time = time;
                    origin.get_or_insert(time);
                    Ok(true)
                }
                _ => {
                    in_order = false;
                    Ok(false)
                }
            }
        })?;
        if !in_order {
            return Ok(None);
        }
        if let Some(error) = too_many_ids {
            return Err(error);
        }
        for (last_line, _) in sessions.into_values() {
            set_bit(&mut last_of_session, last_line);
        }
        let format = format.unwrap_or(HashedFormat::Mooncake);
        Ok(Some(Self {
            path: path.to_owned(),
            name,
            block_size: block_size.unwrap_or(format.default_block_size()).max(1),
            last_of_session,
            origin: origin.unwrap_or(0.0),
            requests,
        }))
    }

    /// Reads the trace again, handing `visit` each request in the order a run serves it.
    /// The file is read and its lines parsed on a thread of their own, a few batches ahead
    /// of `visit`.
    pub fn replay(
        &self,
        mut visit: impl FnMut(StreamedRequest<'_>),
    ) -> Result<(), HashedTraceError> {
        let (sender, batches) = std::sync::mpsc::sync_channel(BATCHES_AHEAD);
        std::thread::scope(|scope| {
            scope.spawn(move || self.read_batches(&sender));
            for batch in batches {
                batch?.hand_over(&mut visit);
            }
            Ok(())
        })
    }

    /// Reads the trace into batches sent to `sender`; a line that cannot be read ends it,
    /// sent as the last.
    fn read_batches(&self, sender: &SyncSender<Result<Batch, HashedTraceError>>) {
        let mut flights: HashMap<String, Flight> = HashMap::new();
        let mut sessions = 0u32;
        let mut batch = Batch::default();
        let mut time = f64::NAN;
        let read = for_each_line(&self.path, &self.name, |line, content| {
            let fields = Line::parse(&self.name, line, content)?;
            let identity = fields.session(&self.name, line);
            let last = bit(&self.last_of_session, line);
            let mut flight = flights.remove(&identity).unwrap_or_else(|| {
                sessions += 1;
                Flight {
                    number: sessions - 1,
                    ids: PreviousIds::default(),
                    chain: SessionChain::default(),
                    last_time: None,
                }
            });
            let sent = fields.time(&mut flight.last_time);
            let now = sent.unwrap_or(self.origin) - self.origin;
            if now != time {
                batch.close_time();
                time = now;
                if batch.entries.len() >= BATCH_REQUESTS
                    && sender.send(Ok(std::mem::take(&mut batch))).is_err()
                {
                    return Ok(false);
                }
            }
            let request = fields.request(String::new(), sent, line);
            let new = flight.ids.next(&request, self.block_size);
            let entry = flight
                .chain
                .next(&new, self.block_size, flight.number, &mut batch.blocks);
            batch
                .entries
                .push((now, line, entry, identity.clone(), last));
            if !last {
                flights.insert(identity, flight);
            }
            Ok(true)
        });
        let end = read.map(|()| {
            batch.close_time();
            batch
        });
        // Only a run that ended has stopped listening: nothing to tell it then.
        let _ = sender.send(end);
    }
}

impl Batch {
    /// Orders the requests of the last time read by session in order of first appearance (as
    /// the whole trace orders requests sent at the same time), each session's in file order.
    fn close_time(&mut self) {
        self.entries[self.same_time..].sort_by_key(|(_, _, request, ..)| request.session);
        self.same_time = self.entries.len();
    }

    /// Hands the requests over to `visit`.
    fn hand_over(&self, visit: &mut impl FnMut(StreamedRequest<'_>)) {
        for (time, line, request, identity, last) in &self.entries {
            visit(StreamedRequest {
                time: *time,
                line: *line,
                request,
                identity,
                new_blocks: &self.blocks[crate::trace::range(&request.new_blocks)],
                last: *last,
            });
        }
    }
}

/// Calls `each` with every non-empty line of the file at `path` (named `name`) and its number,
/// from 1, until it returns `false`.
fn for_each_line(
    path: &Path,
    name: &str,
    mut each: impl FnMut(usize, &str) -> Result<bool, HashedTraceError>,
) -> Result<(), HashedTraceError> {
    let unreadable = |error: std::io::Error| HashedTraceError::Read {
        path: name.to_owned(),
        reason: error.to_string(),
    };
    let mut reader = BufReader::with_capacity(1 << 20, File::open(path).map_err(unreadable)?);
    let mut content = String::new();
    let mut line = 0;
    loop {
        content.clear();
        line += 1;
        let read = reader
            .read_line(&mut content)
            .map_err(|error| HashedTraceError::Line {
                path: name.to_owned(),
                line,
                reason: error.to_string(),
            })?;
        if read == 0 {
            return Ok(());
        }
        if !content.trim().is_empty() && !each(line, content.trim_end())? {
            return Ok(());
        }
    }
}

fn set_bit(bits: &mut Vec<u64>, index: usize) {
    let word = index / 64;
    if bits.len() <= word {
        bits.resize(word + 1, 0);
    }
    bits[word] |= 1 << (index % 64);
}

fn bit(bits: &[u64], index: usize) -> bool {
    bits.get(index / 64)
        .is_some_and(|word| word & (1 << (index % 64)) != 0)
}
