//! What the wire contract says about free text, shared by every crate that checks a field.

/// The JSON Schema pattern of a text that must not be blank: it holds one character that is
/// not white space.
pub const NOT_BLANK: &str = r"\S";

/// The JSON Schema pattern of a one-line name: not blank and without control characters
/// (Unicode `Cc`: U+0000–U+001F and U+007F–U+009F).
pub const LINE: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$";

/// A text is blank when it holds nothing but white space as JSON Schema patterns read `\s`
/// (ECMA-262: tab, line feed, vertical tab, form feed, carriage return, space, U+00A0, U+1680,
/// U+2000–U+200A, U+2028, U+2029, U+202F, U+205F, U+3000, U+FEFF), so that this and the
/// contract's [`NOT_BLANK`] pattern agree on every text.
pub fn is_blank(s: &str) -> bool {
    s.chars().all(|c| {
        matches!(
            c,
            '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
                ..='\u{200a}'
                    | '\u{2028}'
                    | '\u{2029}'
                    | '\u{202f}'
                    | '\u{205f}'
                    | '\u{3000}'
                    | '\u{feff}'
        )
    })
}

#[cfg(test)]
mod tests {
    use super::is_blank;

    #[test]
    fn blank_is_what_a_json_schema_pattern_reads_as_white_space() {
        for t in ["", " ", "\t\n\r", "\u{3000}", "\u{a0}\u{feff}", "\u{2028}"] {
            assert!(is_blank(t), "{t:?}");
        }
        for t in [
            "a", " 报告 ", "\u{1}", "\u{1c}", "\u{85}", "\u{200b}", "\u{7f}",
        ] {
            assert!(!is_blank(t), "{t:?}");
        }
    }
}
