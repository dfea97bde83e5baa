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
    /// The path names something other than a regular file (a FIFO, a
    /// device, ...), which reading could block on or never finish.
    NotAFile {
        /// The path as given.
        path: PathBuf,
        /// What it is.
        what: &'static str,
    },
    /// The file is larger than any scenario ([`MAX_SCENARIO_BYTES`]).
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size in bytes.
        bytes: u64,
    },
    /// The file is not a valid scenario: where, and what was wrong.
    Spec(SpecError),
}

/// The largest scenario file read: a scenario is a page of TOML; a
/// path to a device or a huge file is refused instead of read until
/// memory runs out.
pub const MAX_SCENARIO_BYTES: u64 = 1 << 20;

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
            LoadError::NotAFile { path, what } => write!(
                f,
                "{}: is {what}, not a regular file; a scenario is a TOML file",
                path.display()
            ),
            LoadError::TooLarge { path, bytes } => write!(
                f,
                "{}: {bytes} bytes, larger than any scenario (at most {} bytes)",
                path.display(),
                MAX_SCENARIO_BYTES
            ),
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
        let meta = stat(p)?;
        if meta.is_dir() {
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
            // A FIFO or a link to a device among them is refused here,
            // before anything reads it (a read could block for ever).
            for f in &in_dir {
                regular(f)?;
            }
            files.extend(in_dir);
        } else {
            regular_as(p, &meta)?;
            files.push(p.clone());
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    files.retain(|f| seen.insert(std::fs::canonicalize(f).unwrap_or_else(|_| f.clone())));
    Ok(files)
}

/// `path`'s metadata (followed through links); a path that names nothing
/// is [`LoadError::Missing`].
fn stat(path: &Path) -> Result<std::fs::Metadata, LoadError> {
    std::fs::metadata(path).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => LoadError::Missing {
            path: path.to_owned(),
        },
        _ => LoadError::Io {
            path: path.to_owned(),
            error,
        },
    })
}

/// Whether `path` (followed through links) is a regular file no larger
/// than a scenario can be.
fn regular(path: &Path) -> Result<(), LoadError> {
    regular_as(path, &stat(path)?)
}

/// [`regular`], given `path`'s metadata.
fn regular_as(path: &Path, meta: &std::fs::Metadata) -> Result<(), LoadError> {
    if let Some(what) = super::output::not_regular(meta.file_type()) {
        return Err(LoadError::NotAFile {
            path: path.to_owned(),
            what,
        });
    }
    if meta.len() > MAX_SCENARIO_BYTES {
        return Err(LoadError::TooLarge {
            path: path.to_owned(),
            bytes: meta.len(),
        });
    }
    Ok(())
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
    use std::io::Read;
    regular(path)?;
    let io = |error| LoadError::Io {
        path: path.to_owned(),
        error,
    };
    let mut text = String::new();
    // Bounded even if the file grows after the check.
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_SCENARIO_BYTES + 1).read_to_string(&mut text))
        .map_err(io)?;
    if text.len() as u64 > MAX_SCENARIO_BYTES {
        return Err(LoadError::TooLarge {
            path: path.to_owned(),
            bytes: text.len() as u64,
        });
    }
    let scenario = spec::parse_in(&path.display().to_string(), &text, registry)?;
    Ok((scenario, text))
}
