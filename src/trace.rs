//! The readable trace of a simulated run (`zoosim replay --trace`): the
//! simulation emits `tracing` events — client requests, replies, watch
//! events and session states (target `zoosim::client`), servers' role
//! changes (`zoosim::server`), injected faults (`zoosim::fault`) — and
//! this prints them stamped with simulated time, filtered by `RUST_LOG`
//! (default: all of them). Without a subscriber the events cost a check.

use std::fmt;
use std::io::IsTerminal;

use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::EnvFilter;

/// What `--trace` shows when `RUST_LOG` is unset.
pub const DEFAULT_FILTER: &str = "zoosim=debug";

/// Simulated time since the run began (the wall clock means nothing in a
/// simulation); blank outside one.
struct SimulatedTime;

impl FormatTime for SimulatedTime {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        #[cfg(madsim)]
        if let Some(time) = madsim::time::TimeHandle::try_current() {
            return write!(w, "{:>10.3}s", time.elapsed().as_secs_f64());
        }
        write!(w, "{:>11}", "")
    }
}

/// Standard output for the trace. The first write that fails (a full
/// disk) ends the process: exit 2, one line on stderr. The subscriber
/// would otherwise print an error for every event and go on, hundreds
/// of lines of it. (A closed pipe never gets here: SIGPIPE ends the
/// process first, quietly, as for any filter.)
struct TraceOut;

impl std::io::Write for TraceOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        std::io::stdout().write(buf).or_else(|e| cannot_write(e))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stdout().flush().or_else(|e| cannot_write(e))
    }
}

fn cannot_write(e: std::io::Error) -> ! {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "error: cannot write the trace to standard output: {e}"
    );
    std::process::exit(2)
}

/// Prints the trace on stdout from now on, filtered by `RUST_LOG` (or
/// [`DEFAULT_FILTER`]). A bad `RUST_LOG` is an error naming it.
pub fn install() -> Result<(), String> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() => EnvFilter::try_new(&spec)
            .map_err(|e| format!("RUST_LOG={spec:?} is not a tracing filter: {e}"))?,
        _ => EnvFilter::new(DEFAULT_FILTER),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_timer(SimulatedTime)
        .with_ansi(std::io::stdout().is_terminal())
        .with_writer(|| TraceOut)
        .try_init()
        .map_err(|e| format!("cannot install the trace: {e}"))
}
