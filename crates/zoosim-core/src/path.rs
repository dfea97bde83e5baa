//! Path validation at the client boundary (ZooKeeper's PathUtils;
//! docs/ZOOKEEPER.md, "Paths"). Every driver calls this before sending, so
//! a bad path is `BadArguments` everywhere, whatever the underlying client
//! lets through.

use crate::proto::{MultiOp, Op, ZkError};

/// Checks a path by PathUtils.validatePath. For sequential creates ZooKeeper
/// validates `path + "1"`, so a trailing `/` is allowed there.
pub fn validate_path(path: &str, sequential: bool) -> Result<(), ZkError> {
    if sequential {
        let mut p = String::with_capacity(path.len() + 1);
        p.push_str(path);
        p.push('1');
        validate(&p)
    } else {
        validate(path)
    }
}

fn validate(path: &str) -> Result<(), ZkError> {
    if path.is_empty() || !path.starts_with('/') {
        return Err(ZkError::BadArguments);
    }
    if path == "/" {
        return Ok(());
    }
    if path.ends_with('/') {
        return Err(ZkError::BadArguments);
    }
    for component in path[1..].split('/') {
        if component.is_empty() || component == "." || component == ".." {
            return Err(ZkError::BadArguments);
        }
    }
    if path.chars().any(forbidden) {
        return Err(ZkError::BadArguments);
    }
    Ok(())
}

/// Characters PathUtils rejects. Java works on UTF-16 units, so anything
/// outside the BMP (a surrogate pair there) is rejected too.
fn forbidden(c: char) -> bool {
    let c = c as u32;
    c == 0
        || (0x01..=0x1f).contains(&c)
        || (0x7f..=0x9f).contains(&c)
        || (0xd800..=0xf8ff).contains(&c)
        || (0xfff0..=0xffff).contains(&c)
        || c > 0xffff
}

/// Validates every path an op carries, as the Java client does before it
/// sends anything. Creating or deleting `/` itself (in a multi or not) is
/// refused too: the Rust client refuses both without a round trip, so every
/// driver does (the server would answer BadArguments to the delete as well,
/// but after using a zxid).
pub fn validate_op(op: &Op) -> Result<(), ZkError> {
    match op {
        Op::Create { path, .. } | Op::Delete { path, .. } if path == "/" => {
            Err(ZkError::BadArguments)
        }
        Op::Create { path, mode, .. } => validate_path(path, mode.is_sequential()),
        Op::Delete { path, .. }
        | Op::Exists { path, .. }
        | Op::GetData { path, .. }
        | Op::SetData { path, .. }
        | Op::GetChildren { path, .. }
        | Op::Sync { path } => validate_path(path, false),
        Op::Multi(ops) => ops.iter().try_for_each(|op| match op {
            MultiOp::Create { path, .. } | MultiOp::Delete { path, .. } if path == "/" => {
                Err(ZkError::BadArguments)
            }
            MultiOp::Create { path, mode, .. } => validate_path(path, mode.is_sequential()),
            other => validate_path(other.path(), false),
        }),
    }
}

/// The parent of a path as the server computes it (`substring(0,
/// lastSlash)`, "" being the root): `/` for `/` itself and for top-level
/// nodes.
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// The last component of a valid path other than `/`.
pub fn basename(path: &str) -> &str {
    &path[path.rfind('/').map_or(0, |i| i + 1)..]
}

/// `parent` + `/` + `name`, without a double slash at the root.
pub fn join(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_paths() {
        for p in [
            "/",
            "/a",
            "/a/b",
            "/a.b",
            "/zookeeper",
            "/a/...x",
            "/é",
            "/a b",
        ] {
            assert_eq!(validate_path(p, false), Ok(()), "{p}");
        }
    }

    #[test]
    fn rejects_bad_paths() {
        for p in [
            "",
            "a",
            "/a/",
            "//",
            "/a//b",
            "/.",
            "/..",
            "/a/./b",
            "/a/../b",
            "/a\0",
            "/a\u{1}",
            "/\u{7f}",
            "/\u{9f}",
            "/\u{e000}",
            "/\u{fff0}",
            "/\u{1f600}",
        ] {
            assert_eq!(validate_path(p, false), Err(ZkError::BadArguments), "{p:?}");
        }
    }

    #[test]
    fn sequential_allows_trailing_slash() {
        assert_eq!(validate_path("/p/", true), Ok(()));
        assert_eq!(validate_path("/", true), Ok(()));
        assert_eq!(validate_path("/p/", false), Err(ZkError::BadArguments));
        assert_eq!(validate_path("//", true), Err(ZkError::BadArguments));
    }

    #[test]
    fn creating_the_root_is_refused() {
        use crate::proto::CreateMode;
        for mode in [CreateMode::Persistent, CreateMode::PersistentSequential] {
            let op = Op::Create {
                path: "/".into(),
                data: vec![],
                mode,
            };
            assert_eq!(validate_op(&op), Err(ZkError::BadArguments));
        }
        let multi = Op::Multi(vec![MultiOp::Create {
            path: "/".into(),
            data: vec![],
            mode: CreateMode::Persistent,
        }]);
        assert_eq!(validate_op(&multi), Err(ZkError::BadArguments));
        let delete = Op::Delete {
            path: "/".into(),
            version: -1,
        };
        assert_eq!(validate_op(&delete), Err(ZkError::BadArguments));
    }

    #[test]
    fn parent_and_basename() {
        assert_eq!(parent("/a"), "/");
        assert_eq!(parent("/"), "/");
        assert_eq!(parent("/a/b/c"), "/a/b");
        assert_eq!(basename("/a/b"), "b");
        assert_eq!(basename("/a"), "a");
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
    }
}
