//! Writing the files a command makes (`--summary`, `--report`,
//! `--history`, `--out`, `history -o`): never through a symbolic link,
//! never over a FIFO, a device, a socket or a directory, and never half
//! written.
//!
//! An output path must be absent or a regular file. Anything else there
//! was put there by someone for a reason: renaming over it would replace
//! a device node with a plain file (as root, `/dev/full` was), and
//! writing through it would follow a link planted in a report directory
//! to wherever it points. Such a path is refused with what it is, before
//! any work where the command can check early, and again just before the
//! write.
//!
//! A file is written beside its path under a temporary name, synced and
//! renamed into place, so that it is the old file or the whole new one,
//! whatever happens in between (a full disk, a kill).

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

/// An output that cannot be written.
#[derive(Debug)]
pub enum OutputError {
    /// The path exists and is not a regular file.
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What is there ("a symbolic link", "a FIFO", ...).
        what: &'static str,
    },
    /// Writing failed.
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

impl fmt::Display for OutputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutputError::NotAFile { path, what } => write!(
                f,
                "{}: is {what}, not a regular file; refusing to write there (give a new \
                 name or a regular file to replace)",
                path.display()
            ),
            OutputError::Io { path, error } => {
                write!(f, "{}: cannot write: {error}", path.display())
            }
        }
    }
}

impl std::error::Error for OutputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OutputError::Io { error, .. } => Some(error),
            OutputError::NotAFile { .. } => None,
        }
    }
}

/// What a file type is, in words, when it is not a regular file.
pub fn not_regular(t: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if t.is_file() {
        None
    } else if t.is_symlink() {
        Some("a symbolic link")
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

/// Whether `path` may be written: absent, or a regular file (not a link
/// to one).
pub fn check(path: &Path) -> Result<(), OutputError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) => match not_regular(m.file_type()) {
            None => Ok(()),
            Some(what) => Err(OutputError::NotAFile {
                path: path.to_owned(),
                what,
            }),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(OutputError::Io {
            path: path.to_owned(),
            error,
        }),
    }
}

/// Whether `dir` is a directory itself, not a link to one: a link
/// planted where a command makes its subdirectories would take the
/// files in them elsewhere.
pub fn check_dir(dir: &Path) -> Result<(), OutputError> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_dir() => Ok(()),
        Ok(m) => Err(OutputError::NotAFile {
            path: dir.to_owned(),
            what: not_regular(m.file_type()).unwrap_or("a regular file"),
        }),
        Err(error) => Err(OutputError::Io {
            path: dir.to_owned(),
            error,
        }),
    }
}

/// A file being written: its temporary file beside `path`, removed if it
/// is dropped before [`Pending::commit`].
#[derive(Debug)]
pub struct Pending {
    path: PathBuf,
    tmp: PathBuf,
    file: Option<std::fs::File>,
}

impl Pending {
    /// Checks `path` ([`check`]) and creates the temporary file beside it
    /// (so a command can learn, before its work, that it cannot write).
    pub fn create(path: &Path) -> Result<Pending, OutputError> {
        check(path)?;
        let io = |error| OutputError::Io {
            path: path.to_owned(),
            error,
        };
        let Some(name) = path.file_name() else {
            return Err(io(std::io::Error::other("not a file name")));
        };
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".{}.tmp", std::process::id()));
        let tmp = path.with_file_name(tmp_name);
        // A new file only: never through whatever may sit at the
        // temporary name.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(io)?;
        Ok(Pending {
            path: path.to_owned(),
            tmp,
            file: Some(file),
        })
    }

    /// The path it will write.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `bytes`, syncs them and renames the file into place, after
    /// checking the path again.
    pub fn commit(mut self, bytes: &[u8]) -> Result<(), OutputError> {
        let io = |error| OutputError::Io {
            path: self.path.clone(),
            error,
        };
        let Some(mut file) = self.file.take() else {
            return Err(io(std::io::Error::other("written twice")));
        };
        file.write_all(bytes)
            .and_then(|()| file.sync_all())
            .map_err(io)?;
        drop(file);
        check(&self.path)?;
        std::fs::rename(&self.tmp, &self.path).map_err(io)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // Not committed, or committing failed: leave no temporary file
        // (after the rename there is none left to remove).
        let _ = std::fs::remove_file(&self.tmp);
    }
}

/// Writes `bytes` to `path` ([`check`]ed, whole or not at all).
pub fn write(path: &Path, bytes: impl AsRef<[u8]>) -> Result<(), OutputError> {
    Pending::create(path)?.commit(bytes.as_ref())
}
