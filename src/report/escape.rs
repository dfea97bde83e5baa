//! The one escaping function every string from the data goes through
//! before it reaches a page, in text and in attribute values alike.

use std::fmt::{self, Write as _};

/// `s` made safe as HTML text or as a quoted attribute value (either
/// quote): `& < > " '` become entities, and control characters other than
/// newline and tab are shown as `\u{…}` escapes (they are not valid in
/// HTML, and a reader should see that they are there).
pub fn escape(s: &str) -> String {
    Esc(s).to_string()
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
            let control = c.is_control() && c != '\n' && c != '\t';
            if rep.is_none() && !control {
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
        assert_eq!(escape(""), "");
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
