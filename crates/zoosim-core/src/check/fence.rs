//! A resource protected by fencing tokens: it refuses any access (read or
//! write) with a token below the highest it has seen, so a holder that lost
//! its lock without knowing (paused, partitioned) cannot act on it once a
//! newer holder has. Reads are fenced too: with writes alone, a stale
//! holder's read-modify-write could still interleave with the new holder's.

/// The fenced resource: the highest token it has seen, and its counts of accesses
/// accepted and rejected.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct FencedResource {
    highest: Option<u64>,
    accepted: u64,
    rejected: u64,
}

impl FencedResource {
    /// A resource that has seen no access yet.
    pub fn new() -> FencedResource {
        FencedResource::default()
    }

    /// One access with `token`: true if accepted.
    pub fn access(&mut self, token: u64) -> bool {
        if self.highest.is_some_and(|h| token < h) {
            self.rejected += 1;
            return false;
        }
        self.highest = Some(token);
        self.accepted += 1;
        true
    }

    /// A shared reader's access: accepted if no newer write has been seen;
    /// readers do not fence each other out.
    pub fn read(&mut self, token: u64) -> bool {
        if self.highest.is_some_and(|h| token < h) {
            self.rejected += 1;
            return false;
        }
        self.accepted += 1;
        true
    }

    /// The highest token a write access was accepted with, if any.
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }

    /// Accesses (reads and writes) accepted so far.
    pub fn accepted(&self) -> u64 {
        self.accepted
    }

    /// Accesses (reads and writes) refused so far, for a token below the highest.
    pub fn rejected(&self) -> u64 {
        self.rejected
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_smaller_token_is_refused_once_a_larger_one_was_seen() {
        let mut r = FencedResource::new();
        assert!(r.access(3));
        assert!(r.access(3));
        assert!(r.access(5));
        assert!(!r.access(3));
        assert!(r.access(5));
        assert_eq!((r.accepted(), r.rejected(), r.highest()), (4, 1, Some(5)));
        // Readers: no fencing among themselves, fenced by writes.
        assert!(r.read(7) && r.read(6) && r.read(5) && !r.read(4));
        assert_eq!(r.highest(), Some(5));
    }
}
