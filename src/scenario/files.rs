//! Reading scenario files from disk: the shell around the pure parser
//! ([`super::spec`]), shared by the `zoosim` command, the tests and the
//! benches.

use std::path::{Path, PathBuf};

use super::custom::Registry;
use super::spec::{self, Scenario};

/// The scenario files under `paths`: files as given, directories' *.toml
/// sorted by name.
pub fn scenario_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut in_dir: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| format!("{}: cannot read the directory: {e}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "toml"))
                .collect();
            in_dir.sort();
            if in_dir.is_empty() {
                return Err(format!("{}: no scenario files (*.toml) in it", p.display()));
            }
            files.extend(in_dir);
        } else if p.is_file() {
            files.push(p.clone());
        } else {
            return Err(format!("{}: no such file or directory", p.display()));
        }
    }
    Ok(files)
}

/// Reads and parses one scenario file; the error names the file (and the
/// line and column for a bad one).
pub fn load(path: &Path) -> Result<Scenario, String> {
    load_in(path, &Registry::new())
}

/// [`load`], knowing `registry`'s recipes too.
pub fn load_in(path: &Path, registry: &Registry) -> Result<Scenario, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    spec::parse_in(&path.display().to_string(), &text, registry).map_err(|e| e.to_string())
}
