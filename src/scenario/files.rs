//! Reading scenario files from disk: the shell around the pure parser
//! ([`super::spec`]), shared by the `zoosim` command, the tests and the
//! benches.

use std::fmt;
use std::path::{Path, PathBuf};

use super::registry::Registry;
use super::spec::{self, Scenario, SpecError};

/// A scenario file that could not be read or is not a valid scenario.
#[derive(Debug)]
pub enum LoadError {
    /// A path given names no file or directory.
    Missing {
        /// The path as given.
        path: PathBuf,
    },
    /// A directory given holds no `*.toml`.
    NoScenarios {
        /// The directory as given.
        dir: PathBuf,
    },
    /// The file or directory could not be read.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why it could not be read.
        error: std::io::Error,
    },
    /// The file is not a valid scenario: where, and what was wrong.
    Spec(SpecError),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Missing { path } => {
                write!(f, "{}: no such file or directory", path.display())
            }
            LoadError::NoScenarios { dir } => {
                write!(f, "{}: no scenario files (*.toml) in it", dir.display())
            }
            LoadError::Io { path, error } => write!(f, "{}: cannot read: {error}", path.display()),
            LoadError::Spec(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LoadError::Io { error, .. } => Some(error),
            LoadError::Spec(e) => Some(e),
            _ => None,
        }
    }
}

impl From<SpecError> for LoadError {
    fn from(e: SpecError) -> LoadError {
        LoadError::Spec(e)
    }
}

/// The scenario files under `paths`: files as given, directories' *.toml
/// sorted by name; a file named twice (directly, through a directory or
/// a link) is taken once, where it first came.
pub fn scenario_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let mut files = Vec::new();
    for p in paths {
        // `is_dir` and `is_file` answer false for a path that cannot be
        // followed (a symbolic link loop, a denied directory): say why.
        if let Err(error) = std::fs::metadata(p) {
            return Err(match error.kind() {
                std::io::ErrorKind::NotFound => LoadError::Missing { path: p.clone() },
                _ => LoadError::Io {
                    path: p.clone(),
                    error,
                },
            });
        }
        if p.is_dir() {
            let io = |error| LoadError::Io {
                path: p.clone(),
                error,
            };
            let mut in_dir: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(io)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "toml"))
                .collect();
            in_dir.sort();
            if in_dir.is_empty() {
                return Err(LoadError::NoScenarios { dir: p.clone() });
            }
            files.extend(in_dir);
        } else if p.is_file() {
            files.push(p.clone());
        } else {
            return Err(LoadError::Missing { path: p.clone() });
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    files.retain(|f| seen.insert(std::fs::canonicalize(f).unwrap_or_else(|_| f.clone())));
    Ok(files)
}

/// Reads and parses one scenario file; the error names the file (and the
/// line and column for a bad one).
pub fn load(path: &Path) -> Result<Scenario, LoadError> {
    load_in(path, &Registry::new())
}

/// [`load`], knowing `registry`'s recipes too.
pub fn load_in(path: &Path, registry: &Registry) -> Result<Scenario, LoadError> {
    load_source_in(path, registry).map(|(s, _)| s)
}

/// [`load_in`], with the text the scenario was parsed from (a sweep's
/// summary records its hash, so that shards run on different files are
/// told apart).
pub fn load_source_in(path: &Path, registry: &Registry) -> Result<(Scenario, String), LoadError> {
    let text = std::fs::read_to_string(path).map_err(|error| LoadError::Io {
        path: path.to_owned(),
        error,
    })?;
    let scenario = spec::parse_in(&path.display().to_string(), &text, registry)?;
    Ok((scenario, text))
}
