//! Running the `zoosim` command from a test: its exit code and output,
//! killed past a time limit; scratch directories. Shared by the tests of
//! the command against hostile input (`tests/hostile.rs`,
//! `tests/hostile_input.rs`).

#![allow(dead_code)] // each test binary uses a part

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs zoosim in the crate's directory: (exit code, stdout, stderr).
/// Killed, and the test failed, past `limit` (a hang is the defect some
/// of these tests look for).
pub fn zoosim_in(dir: &Path, args: &[&str], limit: Duration) -> (i32, String, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_zoosim"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("zoosim runs");
    finish(child, limit, &format!("zoosim {args:?}"))
}

/// Waits for `child` (its output piped) at most `limit`: (exit code,
/// stdout, stderr). Killed, and the test failed, past it.
pub fn finish(child: std::process::Child, limit: Duration, what: &str) -> (i32, String, String) {
    let pid = child.id() as i32;
    // Read while it runs (a full pipe would stop it), in a thread, so
    // that the wait can give up.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(limit) {
        Ok(out) => out.expect("output"),
        Err(_) => {
            // SAFETY: kill(2) on the child's pid, which it still is
            // (its wait has not returned).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{what}: still running after {limit:?}");
        }
    };
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn zoosim(args: &[&str]) -> (i32, String, String) {
    zoosim_in(
        Path::new(env!("CARGO_MANIFEST_DIR")),
        args,
        Duration::from_secs(120),
    )
}

pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("zoosim-hostile-")
        .tempdir()
        .unwrap()
}
