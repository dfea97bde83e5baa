//! Records the commit a binary was built from, so a failure it reports
//! names it (ZOOSIM_COMMIT; "unknown" outside a git checkout).
//!
//! Cargo reruns this script when the files named below change. In a git
//! worktree `.git` is a file, not a directory, so the paths come from git
//! itself (`--git-dir` for HEAD, `--git-common-dir` for the branches): a
//! path that does not exist would make Cargo rerun the script, and rebuild
//! the crate, on every build.
fn main() {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=ZOOSIM_COMMIT={commit}");
    match (
        git(&["rev-parse", "--path-format=absolute", "--git-dir"]),
        git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]),
    ) {
        (Some(dir), Some(common)) => {
            println!("cargo:rerun-if-changed={dir}/HEAD");
            println!("cargo:rerun-if-changed={common}/refs/heads");
            // Only if present: a path that does not exist reruns always.
            let packed = format!("{common}/packed-refs");
            if std::path::Path::new(&packed).exists() {
                println!("cargo:rerun-if-changed={packed}");
            }
        }
        // Not a checkout: nothing to watch but this script.
        _ => println!("cargo:rerun-if-changed=build.rs"),
    }
}
