//! Input quoted back to a person, cut short: the one place that decides
//! how much of a value an error message, a terminal line or a report page
//! shows.
//!
//! A history may hold a 200 MB number or a 50 MB value, an EDN file a
//! 100 KB token; quoted whole, one bad line made a 200 MB error message,
//! and one value 52 MB of standard output and a 367 MB page. Whatever
//! quotes input goes through [`Cut`]: at most a bounded number of
//! characters (cut on a character boundary), then `…` and the whole's
//! length in bytes, and, where the caller knows it, where the whole is:
//! `abcd… (52,428,800 bytes; whole at line 12)`. The whole is never
//! copied: a value is formatted into the cut, which keeps its start and
//! only counts the rest.

use std::borrow::Cow;
use std::fmt::{self, Write as _};

/// The characters of one value shown: enough to recognise it.
pub const VALUE: usize = 60;

/// The characters of one word of a message shown (a key, a token, a
/// value quoted by a parser's message).
pub const WORD: usize = 80;

/// The characters of a whole message about bad input shown (it may quote
/// several values, each within [`WORD`]).
pub const MESSAGE: usize = 400;

/// What marks a cut.
pub const ELLIPSIS: char = '…';

/// A value's start, and the whole's length: a [`fmt::Write`] that keeps
/// the first `most` characters written to it and counts the rest.
pub struct Cut {
    kept: String,
    /// Characters written, counted up to `most + 1`.
    chars: usize,
    bytes: usize,
    most: usize,
}

impl Cut {
    /// An empty cut that keeps `most` characters.
    pub fn new(most: usize) -> Cut {
        Cut {
            kept: String::new(),
            chars: 0,
            bytes: 0,
            most,
        }
    }

    /// `v` formatted (`Display`) into a new cut of `most` characters.
    pub fn of(v: &dyn fmt::Display, most: usize) -> Cut {
        let mut cut = Cut::new(most);
        // Writing into a `Cut` never fails; a `Display` that fails on its
        // own leaves what it wrote.
        let _ = write!(cut, "{v}");
        cut
    }

    /// Whether more was written than kept.
    pub fn was_cut(&self) -> bool {
        self.chars > self.most
    }

    /// The whole's length in bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// The kept start, `…` and the whole's length if it was cut, with
    /// `whole` (where to see it whole) when given.
    pub fn finish(self, whole: Option<&dyn fmt::Display>) -> String {
        if !self.was_cut() {
            return self.kept;
        }
        let mut out = self.kept;
        out.push(ELLIPSIS);
        let _ = write!(out, " ({}", bytes(self.bytes));
        if let Some(w) = whole {
            let _ = write!(out, "; whole {w}");
        }
        out.push(')');
        out
    }

    /// Like [`Cut::finish`], the kept start quoted as Rust quotes a
    /// string (`{:?}`: escapes shown), the `…` inside the quotes.
    pub fn finish_quoted(self, whole: Option<&dyn fmt::Display>) -> String {
        let quoted = format!("{:?}", self.kept);
        if !self.was_cut() {
            return quoted;
        }
        let mut out = String::with_capacity(quoted.len() + 40);
        out.push_str(&quoted[..quoted.len() - 1]);
        out.push(ELLIPSIS);
        out.push('"');
        let _ = write!(out, " ({}", bytes(self.bytes));
        if let Some(w) = whole {
            let _ = write!(out, "; whole {w}");
        }
        out.push(')');
        out
    }
}

impl fmt::Write for Cut {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.bytes += s.len();
        if self.chars > self.most {
            return Ok(());
        }
        for c in s.chars() {
            // Counted one past `most`, no further: what tells a value of
            // exactly `most` characters from a longer one.
            self.chars += 1;
            if self.chars > self.most {
                return Ok(());
            }
            self.kept.push(c);
        }
        Ok(())
    }
}

/// `s` in at most `most` characters and a note: itself when it fits.
pub fn cut(s: &str, most: usize) -> Cow<'_, str> {
    if s.len() <= most {
        return Cow::Borrowed(s);
    }
    let c = Cut::of(&s, most);
    if c.was_cut() {
        Cow::Owned(c.finish(None))
    } else {
        Cow::Borrowed(s)
    }
}

/// [`cut`], the note saying where the whole is (`at line 12`, `in FILE`).
pub fn cut_at<'a>(s: &'a str, most: usize, whole: &dyn fmt::Display) -> Cow<'a, str> {
    if s.len() <= most {
        return Cow::Borrowed(s);
    }
    let c = Cut::of(&s, most);
    if c.was_cut() {
        Cow::Owned(c.finish(Some(whole)))
    } else {
        Cow::Borrowed(s)
    }
}

/// `s` quoted as Rust quotes a string (`{:?}`), its start only when it is
/// longer than `most` characters: `"abcd…" (52,428,800 bytes)`.
pub fn quoted(s: &str, most: usize) -> String {
    Cut::of(&s, most).finish_quoted(None)
}

/// `v` as it displays, in at most `most` characters and a note (the whole
/// is formatted once, and counted, never kept).
pub fn display(v: &dyn fmt::Display, most: usize) -> String {
    Cut::of(v, most).finish(None)
}

/// A message that quotes input, cut: every word (a run without spaces)
/// longer than [`WORD`] characters cut to its start and its length, then
/// the whole message to [`MESSAGE`] characters. A message that fits is
/// itself.
pub fn message(m: &str) -> Cow<'_, str> {
    let words = words(m, WORD);
    if words.len() <= MESSAGE {
        return words;
    }
    Cow::Owned(Cut::of(&words, MESSAGE).finish(None))
}

/// `m` with every word (a run without spaces) longer than `most`
/// characters cut to its start and its length; the rest as it is.
pub fn words(m: &str, most: usize) -> Cow<'_, str> {
    if !m
        .split(' ')
        .any(|w| w.len() > most && w.chars().count() > most)
    {
        return Cow::Borrowed(m);
    }
    let mut out = String::new();
    for (k, w) in m.split(' ').enumerate() {
        if k > 0 {
            out.push(' ');
        }
        out.push_str(&cut(w, most));
    }
    Cow::Owned(out)
}

/// `n` bytes in words, its digits grouped by three: `52,428,800 bytes`.
pub fn bytes(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 6);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(d);
    }
    out.push_str(if n == 1 { " byte" } else { " bytes" });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_itself_and_long_text_is_cut_with_its_length() {
        assert_eq!(cut("abc", 3), "abc");
        assert!(matches!(cut("abc", 3), Cow::Borrowed(_)));
        assert_eq!(cut("abcd", 3), "abc… (4 bytes)");
        assert_eq!(
            cut_at(&"x".repeat(52_428_800), 4, &"at line 12"),
            "xxxx… (52,428,800 bytes; whole at line 12)"
        );
        // On a character boundary, the length in bytes.
        assert_eq!(cut("ééé", 2), "éé… (6 bytes)");
        // Multi-byte text within `most` characters but over `most` bytes.
        assert_eq!(cut("éé", 2), "éé");
    }

    #[test]
    fn quoting_cuts_before_escaping() {
        assert_eq!(quoted("a\"b", 10), "\"a\\\"b\"");
        assert_eq!(quoted("abcdef", 3), "\"abc…\" (6 bytes)");
        assert_eq!(quoted(&"\n".repeat(100), 2), "\"\\n\\n…\" (100 bytes)");
    }

    #[test]
    fn a_value_is_counted_not_kept() {
        struct Big;
        impl fmt::Display for Big {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                for _ in 0..1000 {
                    f.write_str("0123456789")?;
                }
                Ok(())
            }
        }
        let c = Cut::of(&Big, 5);
        assert_eq!(c.kept.len(), 5);
        assert_eq!(c.finish(None), "01234… (10,000 bytes)");
        assert_eq!(display(&17, 5), "17");
    }

    #[test]
    fn messages_cut_their_long_words_and_their_length() {
        let m = format!(
            "invalid type: string \"{}\", expected u64",
            "1".repeat(1 << 20)
        );
        let got = message(&m);
        assert!(got.starts_with("invalid type: string \"111"), "{got}");
        assert!(got.contains("… (1,048,579 bytes) expected u64"), "{got}");
        assert!(got.len() < 200, "{got}");
        let spaced = "a ".repeat(10_000);
        let got = message(&spaced);
        assert!(got.chars().count() < MESSAGE + 40, "{got}");
        assert!(got.ends_with("… (20,000 bytes)"), "{got}");
        assert_eq!(message("short"), "short");
    }

    #[test]
    fn byte_counts_group_their_digits() {
        assert_eq!(bytes(0), "0 bytes");
        assert_eq!(bytes(1), "1 byte");
        assert_eq!(bytes(999), "999 bytes");
        assert_eq!(bytes(1000), "1,000 bytes");
        assert_eq!(bytes(209_715_200), "209,715,200 bytes");
    }
}
