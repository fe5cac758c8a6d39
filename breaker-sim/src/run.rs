//! Replaying one trace against many policies at once: the trace is read once, in chunks, and
//! every chunk is fed to all policies, in parallel on all cores.

use crate::replay::{NamedPolicy, Options, Sim};
use crate::report::Report;
use crate::trace::{TraceError, TraceReader};

/// How many calls are read before they are fed to the policies (about 2.5 MiB).
pub const CHUNK: usize = 1 << 16;

/// Why a replay could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The trace is bad.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A policy is invalid.
    #[error("{0}")]
    Policy(String),
}

/// Replays the trace of `reader` against every policy, reading it once; returns one report
/// per policy, in the order of `policies`. `progress` is called after each chunk with the bytes
/// read so far.
///
/// Memory: one chunk of [`CHUNK`] calls, the reader's window, and per policy its calls in
/// flight and the lines of the last [`LOOK_AHEAD`](crate::replay::LOOK_AHEAD) of trace time;
/// independent of the trace's length. The policies are split over
/// `std::thread::available_parallelism` threads; the result does not depend on how many.
///
/// # Errors
/// [`RunError::Policy`] for an invalid policy (before anything is read);
/// [`RunError::Trace`] for a bad line (nothing is reported then).
pub fn run(
    reader: &mut TraceReader,
    policies: &[NamedPolicy],
    options: Options,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<Report>, RunError> {
    let mut sims = policies
        .iter()
        .map(|p| Sim::new(p, options))
        .collect::<Result<Vec<_>, _>>()
        .map_err(RunError::Policy)?;
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(sims.len())
        .max(1);
    let mut chunk = Vec::with_capacity(CHUNK);
    loop {
        chunk.clear();
        if reader.read_chunk(&mut chunk, CHUNK)? == 0 {
            break;
        }
        feed_all(&mut sims, &chunk, threads);
        progress(reader.bytes_read());
    }
    let phases = reader.phases().to_vec();
    Ok(sims.into_iter().map(|s| s.finish(&phases)).collect())
}

fn feed_all(sims: &mut [Sim], chunk: &[crate::trace::Call], threads: usize) {
    if threads <= 1 {
        for s in sims {
            s.feed(chunk);
        }
        return;
    }
    // Contiguous shares, one per thread; each policy is fed by one thread only.
    let per = sims.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for group in sims.chunks_mut(per) {
            scope.spawn(move || {
                for s in group {
                    s.feed(chunk);
                }
            });
        }
    });
}
