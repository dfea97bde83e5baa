//! The one escaping function every string from the data goes through
//! before it reaches a page, in text and in attribute values alike.

use std::fmt::{self, Write as _};

/// `s` made safe as HTML text or as a quoted attribute value (either
/// quote): `& < > " '` become entities, and control characters other than
/// newline and tab, and the invisible characters that reorder text
/// ([`hidden`]), are shown as `\u{…}` escapes (a reader should see that
/// they are there).
pub fn escape(s: &str) -> String {
    Esc(s).to_string()
}

/// Characters a reader must see as escapes, not as their effect: control
/// characters other than newline and tab (a terminal runs ANSI escape
/// sequences; HTML does not allow them), and the bidirectional formatting
/// characters, which display text in another order than it is (after
/// U+202E, `txt.exe` shows as `exe.txt`).
pub fn hidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `s` for a terminal, on one line: [`hidden`] characters and newlines
/// shown as `\u{…}` escapes, so that text from a file (a scenario's
/// description, a name) cannot move the cursor, recolour the screen or
/// reorder what is shown.
pub fn terminal(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| hidden(c) || c == '\n') {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if hidden(c) || c == '\n' {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Bytes (node data, paths from a history) as text: valid UTF-8 as it is,
/// every byte of an invalid sequence as `\xNN`. The result still goes
/// through [`escape`] on its way into a page.
pub fn show_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// [`escape`] as a `Display`, so the renderers write escaped text straight
/// into the page without a copy per string.
pub(crate) struct Esc<'a>(pub &'a str);

impl fmt::Display for Esc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        let mut last = 0;
        for (i, c) in s.char_indices() {
            let rep: Option<&str> = match c {
                '&' => Some("&amp;"),
                '<' => Some("&lt;"),
                '>' => Some("&gt;"),
                '"' => Some("&quot;"),
                '\'' => Some("&#39;"),
                _ => None,
            };
            if rep.is_none() && !hidden(c) {
                continue;
            }
            f.write_str(&s[last..i])?;
            match rep {
                Some(r) => f.write_str(r)?,
                None => write!(f, "\\u{{{:x}}}", c as u32)?,
            }
            last = i + c.len_utf8();
        }
        f.write_str(&s[last..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_quotes_and_controls() {
        assert_eq!(
            escape("<script>alert(\"x\" & 'y')</script>"),
            "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;"
        );
        assert_eq!(
            escape("a\u{0}b\u{1b}[0m\r\n\tc"),
            "a\\u{0}b\\u{1b}[0m\\u{d}\n\tc"
        );
        assert_eq!(escape("/lock/guid-é-lock-0003"), "/lock/guid-é-lock-0003");
        // Text that displays reordered shows its reordering.
        assert_eq!(escape("a\u{202e}txt.exe"), "a\\u{202e}txt.exe");
        assert_eq!(escape("\u{2066}x\u{2069}"), "\\u{2066}x\\u{2069}");
        assert_eq!(escape(""), "");
    }

    #[test]
    fn terminal_text_shows_escapes_and_reordering_on_one_line() {
        assert_eq!(terminal("plain é"), "plain é");
        assert_eq!(
            terminal("red \u{1b}[31mX\nnext \u{202e}cba"),
            "red \\u{1b}[31mX\\u{a}next \\u{202e}cba"
        );
    }

    #[test]
    fn bytes_show_invalid_utf8_as_hex_escapes() {
        assert_eq!(show_bytes(b"ok"), "ok");
        assert_eq!(show_bytes(b"a\xff\xfeb"), "a\\xff\\xfeb");
        assert_eq!(show_bytes("é".as_bytes()), "é");
        // A truncated multi-byte sequence: each byte shown.
        assert_eq!(show_bytes(b"x\xc3"), "x\\xc3");
        // And what it gives is escaped on the way into a page.
        assert_eq!(escape(&show_bytes(b"<\xff>")), "&lt;\\xff&gt;");
    }
}
