//! `zoosim check MODEL`: checks a stateright model of a recipe
//! exhaustively and prints the search's size and speed, every property's
//! verdict, and a shortest counterexample for each that fails; with
//! `--serve ADDR`, opens stateright's Explorer on that (loopback) address
//! instead. Every model comes from [`crate::models::catalog`].

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Instant;

use crate::check::lin::Exhausted;
use crate::models::{catalog, find, Faults, Options, Search, Spec, StopFlag, DEFAULT_MAX_STATES};

/// `zoosim check`'s arguments.
#[derive(clap::Args)]
pub(crate) struct CheckArgs {
    /// The model (`zoosim list` shows them), e.g. lock or barrier.
    model: String,
    /// How many clients.
    #[arg(long, default_value_t = 3)]
    clients: usize,
    /// The recipe's variant (a buggy one, to see it caught), e.g.
    /// lock/herd; the correct one by default.
    #[arg(long)]
    variant: Option<String>,
    /// The faults a run may take: `all` (one of each, the default),
    /// `none`, or a list such as `lost-reply,expiry=2`.
    #[arg(long, default_value = "all")]
    faults: String,
    /// How many faults one run may take in all (each kind also within its
    /// own budget). 1 explores every kind; 2 explores their pairs too, an
    /// order of magnitude more states.
    #[arg(long, default_value_t = crate::models::DEFAULT_MAX_FAULTS)]
    max_faults: u8,
    /// Search depth-first instead of breadth-first (counterexamples are
    /// still re-found breadth-first, so they are shortest).
    #[arg(long)]
    dfs: bool,
    /// Reduce by the clients' symmetry, where it is sound (the lock; for
    /// the other models the error says why not).
    #[arg(long)]
    symmetry: bool,
    /// Worker threads for the exhaustive search.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Stop after about this many states generated. A check stopped so
    /// says so and exits 3: nothing failed in the states it saw, but it is
    /// not a proof.
    #[arg(long, default_value_t = DEFAULT_MAX_STATES, value_name = "N")]
    max_states: usize,
    /// Stop once the check holds this much more memory than when it began,
    /// in MiB, measured (every allocation counted): what keeps a model too
    /// large for the machine from taking all its memory (breadth-first,
    /// the lock with 4 clients and 2 faults a run held 4 GiB at ten
    /// million states). A check stopped so says so and exits 3, as at
    /// --max-states.
    #[arg(long, default_value_t = DEFAULT_MEMORY_MIB, value_name = "MIB")]
    memory_mib: u64,
    /// Instead of checking, open stateright's Explorer on this loopback
    /// address (e.g. 127.0.0.1:3000; port 0 picks a free one) to step
    /// through the model in a browser; runs until interrupted.
    #[arg(long, value_name = "ADDR")]
    serve: Option<String>,
}

/// The exit code of a check that stopped at `--max-states` with nothing
/// failed: not a proof, not a failure.
const EXIT_NOT_CONCLUSIVE: u8 = 3;

/// `--memory-mib`'s default: well under what these 2-core, 24 GB machines
/// have, and far more than any shipped model's default check takes.
const DEFAULT_MEMORY_MIB: u64 = 4096;

/// Runs `zoosim check`: exit 0 when every property holds, 1 when one
/// fails, 3 when the search stopped at `--max-states` before either was
/// known, an error (exit 2) for bad arguments.
pub(crate) fn run(args: &CheckArgs) -> Result<ExitCode, String> {
    let faults = Faults::parse(&args.faults).map_err(|e| format!("--faults: {e}"))?;
    if args.threads == 0 {
        return Err("--threads: at least 1".into());
    }
    if args.max_states == 0 {
        return Err("--max-states: at least 1".into());
    }
    if args.memory_mib == 0 {
        return Err("--memory-mib: at least 1".into());
    }
    let model = find(&args.model)?;
    let watch = if args.serve.is_none() {
        super::watch::catch_interrupts(
            "ending the search; what it found so far follows (not a proof)",
        );
        Some(super::watch::watch_in_background(
            None,
            usize::try_from(args.memory_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX),
        ))
    } else {
        None
    };
    let options = Options {
        search: if args.dfs { Search::Dfs } else { Search::Bfs },
        threads: super::clamp_threads("--threads", Some(args.threads)),
        max_states: Some(args.max_states),
        stop: StopFlag(watch.as_ref().map(|w| w.flag())),
    };
    let threads = options.threads;
    let spec = Spec {
        variant: args.variant.clone(),
        clients: args.clients,
        faults,
        max_faults: args.max_faults,
        options,
        symmetry: args.symmetry,
    };
    if let Some(addr) = &args.serve {
        let bound = loopback(addr)?;
        model.serve(&spec, &bound.to_string(), &mut || {
            println!(
                "serving stateright's Explorer for model {} on http://{bound}/ (Ctrl-C to stop)",
                model.name()
            );
            let _ = std::io::stdout().flush();
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let started = Instant::now();
    let report = model.check(&spec)?;
    let seconds = started.elapsed().as_secs_f64();
    let checked = &report.checked;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "model {} ({}), {} clients, faults {} (at most {} a run), {} with {} thread(s)",
        report.model,
        report.variant,
        spec.clients,
        spec.faults,
        spec.max_faults,
        if args.dfs {
            "depth-first"
        } else {
            "breadth-first"
        },
        threads
    );
    let _ = writeln!(
        out,
        "states: {} generated, {} unique, depth {}; {:.2} s ({:.0} states/s, counterexamples included)",
        checked.states,
        checked.unique,
        checked.depth,
        seconds,
        checked.states as f64 / seconds.max(1e-9)
    );
    let why = watch.as_ref().and_then(|w| w.why());
    drop(watch);
    if !checked.conclusive {
        let at = match why {
            Some(Exhausted::Memory) => format!(
                "at --memory-mib {} (measured: the check held that much more memory than \
                 when it began)",
                args.memory_mib
            ),
            Some(Exhausted::Interrupted) => "when interrupted".to_owned(),
            _ => format!("at --max-states {}", args.max_states),
        };
        let _ = writeln!(
            out,
            "NOT EXHAUSTIVE: the search stopped {at} before every state was seen; \"holds so \
             far\" is not a proof. Raise --max-states or --memory-mib if memory allows, or \
             check fewer clients, fewer faults (--faults, --max-faults), with --symmetry \
             where the model has it, or depth-first (--dfs, less memory)."
        );
    }
    let _ = write!(out, "{report}");
    print!("{out}");
    if why == Some(Exhausted::Interrupted) {
        return Ok(ExitCode::from(130));
    }
    Ok(if checked.all_hold() {
        ExitCode::SUCCESS
    } else if checked.any_fails() || checked.conclusive {
        ExitCode::from(1)
    } else {
        ExitCode::from(EXIT_NOT_CONCLUSIVE)
    })
}

/// What `zoosim list` says about the models.
pub(crate) fn list() -> String {
    let mut out = String::new();
    let _ = writeln!(out, "models (`zoosim check MODEL`):");
    for m in catalog() {
        let _ = writeln!(out, "  {}  {}", m.name(), m.about());
        let _ = writeln!(out, "    variants: {}", m.variants().join(", "));
        let _ = writeln!(out, "    properties: {}", m.properties().join(", "));
    }
    let _ = writeln!(
        out,
        "  model faults (`--faults`): {}",
        crate::models::Fault::ALL
            .map(crate::models::Fault::name)
            .join(", ")
    );
    out
}

/// `addr` as one loopback socket address, a free port chosen for port 0;
/// anything else refused: the Explorer has no authentication, and runs
/// the checker for whoever asks.
pub fn loopback(addr: &str) -> Result<SocketAddr, String> {
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| format!("--serve {addr:?}: not an address (e.g. 127.0.0.1:3000): {e}"))?
        .collect();
    let Some(first) = addrs.first().copied() else {
        return Err(format!("--serve {addr:?}: resolves to no address"));
    };
    if let Some(other) = addrs.iter().find(|a| !a.ip().is_loopback()) {
        return Err(format!(
            "--serve {addr:?}: {} is not a loopback address; the Explorer has no \
             authentication, so it serves on loopback only (e.g. 127.0.0.1:3000)",
            other.ip()
        ));
    }
    // Bound here first: a port in use is a clear error, not a panic in
    // the server's thread, and port 0 becomes a free port we can print.
    let listener =
        TcpListener::bind(first).map_err(|e| format!("--serve {addr:?}: cannot listen: {e}"))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("--serve {addr:?}: {e}"))?;
    drop(listener);
    Ok(bound)
}
