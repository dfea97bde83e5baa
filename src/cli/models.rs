//! `zoosim check MODEL`: checks a stateright model of a recipe
//! exhaustively and prints the search's size and speed, every property's
//! verdict, and a shortest counterexample for each that fails; with
//! `--serve ADDR`, opens stateright's Explorer on that (loopback) address
//! instead. Every model comes from the registry: zoosim's own
//! ([`crate::models::catalog`]) and a user's
//! ([`crate::scenario::registry::Registry::with_model`]).

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Instant;

use crate::check::lin::Exhausted;
use crate::models::{
    Faults, Listed, Options, Search, Spec, StopFlag, DEFAULT_MAX_STATES, RENAMED_FAULTS,
};
use crate::scenario::registry::Registry;

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
    /// `none`, or a list such as `lost-reply,forced-expiry=2`.
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
    /// Reduce by the clients' symmetry, where it is sound (the lock and the
    /// election; for the other models the error says why not).
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
pub(crate) fn run(args: &CheckArgs, registry: &Registry) -> Result<ExitCode, String> {
    let faults = Faults::parse(&args.faults).map_err(|e| format!("--faults: {e}"))?;
    for item in args.faults.split(',') {
        let name = item.split('=').next().unwrap_or("").trim();
        if let Some((old, new)) = RENAMED_FAULTS.iter().find(|(old, _)| *old == name) {
            eprintln!(
                "note: the model fault {old:?} is now {new:?} (the simulation's name for the \
                 same fault, or one that says how it differs)"
            );
        }
    }
    if args.threads == 0 {
        return Err("--threads: at least 1".into());
    }
    if args.max_states == 0 {
        return Err("--max-states: at least 1".into());
    }
    if args.memory_mib == 0 {
        return Err("--memory-mib: at least 1".into());
    }
    let model = registry.model(&args.model)?;
    if model.name() != args.model {
        eprintln!(
            "note: the model {:?} is now {:?}, its recipe's name in scenario files",
            args.model,
            model.name()
        );
    }
    let watch = if args.serve.is_none() {
        super::watch::catch_interrupts(
            "ending the search; what it found so far follows (not a proof)",
        );
        Some(super::watch::watch_in_background(
            None,
            super::watch::mib_bytes(args.memory_mib),
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
        serve(model, spec, addr)?;
        return Ok(ExitCode::SUCCESS);
    }
    let started = Instant::now();
    let report = model.check(&spec).map_err(with_option)?;
    let seconds = started.elapsed().as_secs_f64();
    let checked = &report.checked;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "model {} ({}), {} clients, faults {} (at most {} a run), symmetry {}, {} with {} \
         thread(s)",
        report.model,
        report.variant,
        spec.clients,
        spec.faults,
        spec.max_faults,
        if report.bounds.symmetry { "on" } else { "off" },
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
    // The claim the verdicts below make, and no more.
    let _ = writeln!(out, "checked: {}", report.bounds);
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

/// A model's error as the command says it: after the option it is
/// about (`--clients: ...`).
fn with_option(e: crate::models::ModelError) -> String {
    match e.option() {
        Some(option) => format!("{option}: {e}"),
        None => e.to_string(),
    }
}

/// What `zoosim list` says of the model named `name`, under the recipe of
/// that name whose oracle checks `oracle` (None when no model has that
/// name): its variants, its claims with their meanings (a claim that is
/// the oracle's own property says so rather than repeating it), and its
/// reach goals.
pub(crate) fn model_lines(
    registry: &Registry,
    name: &str,
    oracle: &[crate::check::Property],
) -> Option<String> {
    let m = registry.models().find(|m| m.name() == name)?;
    let mut out = String::new();
    let _ = writeln!(out, "    model (`zoosim check {name}`): {}", m.about());
    let _ = writeln!(out, "      variants: {}", m.variants().join(", "));
    let claims = m.claims();
    for c in &claims {
        if oracle.contains(c) {
            let _ = writeln!(out, "      claim {} (the oracle's property above)", c.name);
        } else {
            let _ = writeln!(out, "      claim {c}");
        }
    }
    let goals: Vec<&str> = m
        .properties()
        .into_iter()
        .filter(|p| !claims.iter().any(|c| c.name == *p))
        .collect();
    let _ = writeln!(out, "      reach goals (sometimes): {}", goals.join(", "));
    Some(out)
}

/// What `zoosim list` says of the models after the recipes (each model
/// is under its recipe): the model faults.
pub(crate) fn list_rest() -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "model faults (`zoosim check --faults`): {}",
        crate::models::Fault::ALL
            .map(crate::models::Fault::name)
            .join(", ")
    );
    out
}

/// `--serve ADDR`: stateright's Explorer for `model`, behind a front of
/// our own on `addr` that answers only requests addressed to it.
///
/// The Explorer (stateright's, over tiny_http) answers any request on its
/// port, whatever its `Host:` header, and offers no hook to refuse one. A
/// web page the user visits can rebind its own name to 127.0.0.1 (DNS
/// rebinding) and then drive the Explorer from the browser. So the
/// Explorer listens on another loopback port, chosen free, and `addr` is
/// served by [`front`], which passes on a request only when its `Host:`
/// is the address bound (`127.0.0.1:3000`, or the name given,
/// `localhost:3000`) and refuses any other with 421. What remains: the
/// Explorer's own port answers any host too; it is not printed, and a
/// rebinding page would have to find it among the machine's ports.
fn serve(model: std::sync::Arc<dyn Listed>, spec: Spec, addr: &str) -> Result<(), String> {
    let front_listener = loopback(addr)?;
    let bound = front_listener
        .local_addr()
        .map_err(|e| format!("--serve {addr:?}: {e}"))?;
    let hosts = allowed_hosts(addr, bound);
    // The Explorer's own port: free now, bound by stateright below.
    let inner = TcpListener::bind((bound.ip(), 0))
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("--serve {addr:?}: no free port for the Explorer: {e}"))?;
    let name = model.name();
    let (failed, failure) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Blocks, serving, until the process ends; returns only on error.
        if let Err(e) = model.serve(&spec, &inner.to_string(), &mut || {}) {
            let _ = failed.send(with_option(e));
        }
    });
    // Up when it accepts a connection (a failure to start is reported).
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(inner).is_err() {
        if let Ok(e) = failure.try_recv() {
            return Err(e);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "--serve {addr:?}: the Explorer did not start on {inner}"
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    println!("serving stateright's Explorer for model {name} on http://{bound}/ (Ctrl-C to stop)");
    let _ = std::io::stdout().flush();
    for conn in front_listener.incoming() {
        let Ok(conn) = conn else { continue };
        let hosts = hosts.clone();
        std::thread::spawn(move || front(conn, inner, &hosts));
    }
    Ok(())
}

/// The `Host:` values a request to `bound` (asked for as `addr`) may
/// carry, lowercase: the address bound, and the name given with the
/// port bound (`localhost:3000`); without a port where it is 80.
fn allowed_hosts(addr: &str, bound: SocketAddr) -> Vec<String> {
    let port = bound.port();
    let mut hosts = vec![bound.to_string()];
    let given = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    if !given.is_empty() {
        hosts.push(format!("{given}:{port}"));
    }
    if port == 80 {
        hosts.push(bound.ip().to_string());
        if bound.is_ipv6() {
            hosts.push(format!("[{}]", bound.ip()));
        }
        hosts.push(given.to_owned());
    }
    hosts.iter().map(|h| h.to_ascii_lowercase()).collect()
}

/// The most bytes of a request's head (its line and headers) [`front`]
/// reads; the Explorer's requests are a few hundred.
const MOST_HEAD: usize = 64 << 10;

/// One connection to the front: its request's head is read, its `Host:`
/// checked against `hosts`; a request for another host is answered 421
/// (400 without one), a good one is passed to the Explorer at `inner`
/// with `Connection: close`, and the answer passed back whole. One
/// request per connection: the browser opens another for the next.
fn front(mut conn: std::net::TcpStream, inner: SocketAddr, hosts: &[String]) {
    use std::io::{Read, Write};
    let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(30)));
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(k) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break k + 4;
        }
        if head.len() > MOST_HEAD {
            return refuse(
                &mut conn,
                431,
                "Request Header Fields Too Large",
                "request head too large",
            );
        }
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    };
    let text = String::from_utf8_lossy(&head[..end]).into_owned();
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let mut host = None;
    let mut kept = vec![request_line.to_owned()];
    for line in lines.filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':').unwrap_or((line, ""));
        let name_lc = name.trim().to_ascii_lowercase();
        if name_lc == "host" {
            if host.is_some() {
                return refuse(&mut conn, 400, "Bad Request", "more than one Host header");
            }
            host = Some(value.trim().to_ascii_lowercase());
        }
        // The front says how the connection ends.
        if name_lc != "connection" && name_lc != "keep-alive" {
            kept.push(line.to_owned());
        }
    }
    match host {
        None => return refuse(&mut conn, 400, "Bad Request", "no Host header"),
        Some(h) if !hosts.contains(&h) => {
            return refuse(
                &mut conn,
                421,
                "Misdirected Request",
                &format!(
                    "this Explorer answers requests for {} only, not for {}",
                    hosts[0],
                    crate::quote::quoted(&h, crate::quote::WORD)
                ),
            )
        }
        Some(_) => {}
    }
    let Ok(mut up) = std::net::TcpStream::connect(inner) else {
        return refuse(
            &mut conn,
            502,
            "Bad Gateway",
            "the Explorer is not answering",
        );
    };
    kept.push("Connection: close".to_owned());
    let mut request = kept.join("\r\n").into_bytes();
    request.extend_from_slice(b"\r\n\r\n");
    // The body's start came with the head; the rest follows it.
    request.extend_from_slice(&head[end..]);
    if up.write_all(&request).is_err() {
        return;
    }
    if let Ok(mut down) = conn.try_clone() {
        let mut up_reader = match up.try_clone() {
            Ok(u) => u,
            Err(_) => return,
        };
        // The request's body, if any, copied on while the answer comes.
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut down, &mut up_reader);
        });
    }
    let _ = std::io::copy(&mut up, &mut conn);
    let _ = conn.shutdown(std::net::Shutdown::Both);
}

/// Answers `conn` with `status` and a line of text, and closes it.
fn refuse(conn: &mut std::net::TcpStream, status: u16, reason: &str, why: &str) {
    use std::io::Write;
    let body = format!("zoosim: {why}\n");
    let _ = write!(
        conn,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.shutdown(std::net::Shutdown::Both);
}

/// `addr` as one loopback socket, bound (a free port chosen for port 0);
/// anything else refused: the Explorer has no authentication, and runs
/// the checker for whoever asks.
pub(super) fn loopback(addr: &str) -> Result<TcpListener, String> {
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
    // Bound here: a port in use is a clear error, and port 0 becomes a
    // free port we can print.
    TcpListener::bind(first).map_err(|e| format!("--serve {addr:?}: cannot listen: {e}"))
}
