//! What the wire contract says about free text, shared by every crate that checks a field.

use crate::error::{CoreError, CoreResult, FieldError, FieldReason};

/// The JSON Schema pattern of a text that must not be blank: it holds one character that is
/// not white space.
pub const NOT_BLANK: &str = r"\S";

/// The JSON Schema pattern of a one-line name: not blank and without control characters
/// (Unicode `Cc`: U+0000–U+001F and U+007F–U+009F).
pub const LINE: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$";

/// The JSON Schema pattern of a text kept in a text column: no NUL character (PostgreSQL cannot
/// store one, so no backend does; see [`refuse_nul`]).
pub const NO_NUL: &str = "^[^\\u0000]*$";

/// [`NOT_BLANK`] and [`NO_NUL`] together: one character that is not white space, and no NUL.
pub const NOT_BLANK_NO_NUL: &str = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$";

/// The length of a text as the contract counts it: characters (Unicode scalar values), as
/// JSON Schema's `maxLength` does, never bytes. Every cap the server applies to a text field is
/// counted this way and published as that field's `maxLength`, so a text the document allows is
/// never refused for its size (a CJK character is three bytes, a combining mark two).
pub fn length(s: &str) -> usize {
    s.chars().count()
}

/// `Some(length)` when `s` holds more than `max` characters ([`length`]); `None` otherwise. A
/// text of at most `max` bytes is within it without counting.
pub fn over(s: &str, max: usize) -> Option<usize> {
    if s.len() <= max {
        return None;
    }
    let n = length(s);
    (n > max).then_some(n)
}

/// The refusal of a text over its cap: 413 `PAYLOAD_TOO_LARGE` naming the field, its length
/// in characters and the cap (`details.reason: too_large`).
pub fn too_long(field: &str, len: usize, limit: usize) -> CoreError {
    CoreError::Coded {
        code: crate::ErrorCode::PayloadTooLarge,
        message: format!("{field} is {len} characters; at most {limit} are accepted"),
        details: FieldError::new(field)
            .reason(FieldReason::TooLarge)
            .len(len)
            .limit(limit)
            .into(),
    }
}

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
    use super::{is_blank, over};

    #[test]
    fn length_counts_characters_not_bytes() {
        assert_eq!(over("abc", 3), None);
        assert_eq!(over("abcd", 3), Some(4));
        // Three CJK characters are nine bytes and three characters.
        assert_eq!(over("报告书", 3), None);
        assert_eq!(over("报告书们", 3), Some(4));
        // A letter with two combining marks is three characters.
        assert_eq!(over("o\u{335}\u{31e}", 2), Some(3));
        assert_eq!(over("", 0), None);
    }

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

/// The CJK scripts the text analysis and the search tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CjkScript {
    Han,
    Kana,
    Hangul,
}

/// The CJK script of `c`, after NFKC (so no half-width or compatibility forms remain).
pub fn cjk_script(c: char) -> Option<CjkScript> {
    match u32::from(c) {
        // Iteration mark, ideographic zero, Hangzhou numerals, CJK Unified Ideographs and their
        // extensions A–H, compatibility ideographs (NFKC maps most to unified ones).
        0x3005 | 0x3007 | 0x3021..=0x3029 | 0x3038..=0x303B => Some(CjkScript::Han),
        0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF => Some(CjkScript::Han),
        0x2_0000..=0x3_FFFF => Some(CjkScript::Han),
        // Hiragana, katakana (without the double hyphen and the middle dot, which are
        // punctuation), phonetic extensions, kana supplement and extended-A.
        0x3041..=0x309F | 0x30A1..=0x30FA | 0x30FC..=0x30FF | 0x31F0..=0x31FF => {
            Some(CjkScript::Kana)
        }
        0x1_B000..=0x1_B16F => Some(CjkScript::Kana),
        // Hangul jamo, compatibility jamo, jamo extended A and B, syllables.
        0x1100..=0x11FF | 0x3131..=0x318E | 0xA960..=0xA97F => Some(CjkScript::Hangul),
        0xAC00..=0xD7A3 | 0xD7B0..=0xD7FF => Some(CjkScript::Hangul),
        _ => None,
    }
}

/// Whether CJK characters ([`cjk_script`]) make up at least half of the letters and digits of
/// `s`: a text in Chinese, Japanese or Korean, possibly with some Latin words in it.
pub fn mostly_cjk(s: &str) -> bool {
    let (mut cjk, mut all) = (0usize, 0usize);
    for c in s.chars().filter(|c| c.is_alphanumeric()) {
        all += 1;
        if cjk_script(c).is_some() {
            cjk += 1;
        }
    }
    all > 0 && cjk * 2 >= all
}

#[cfg(test)]
mod cjk_tests {
    use super::mostly_cjk;

    #[test]
    fn mostly_cjk_counts_letters_of_each_script() {
        assert!(mostly_cjk("生命数耗完即算为什么？"));
        assert!(mostly_cjk("本周进度报告 for Q3"));
        assert!(!mostly_cjk("进度报告 for Q3 2026"));
        assert!(mostly_cjk("ひらがなとカタカナ"));
        assert!(mostly_cjk("한국어 문장입니다"));
        assert!(!mostly_cjk("How many days of annual leave?"));
        assert!(!mostly_cjk("the Q3 report 报告"));
        assert!(!mostly_cjk("？！ 123"));
        assert!(!mostly_cjk(""));
    }
}

/// Refuses a stored identifier or name that holds a NUL character, naming the field. PostgreSQL
/// cannot keep NUL in a text column, so no backend stores one there (SQLite could): both refuse
/// it the same way, and a lookup by such text finds nothing. JSON bodies keep it as `\u0000`.
pub fn refuse_nul<'a>(
    fields: impl IntoIterator<Item = (&'static str, Option<&'a str>)>,
) -> CoreResult<()> {
    for (field, value) in fields {
        if value.is_some_and(|v| v.contains('\0')) {
            return Err(CoreError::validation_with(
                format!("{field} holds a NUL character"),
                FieldError::new(field).reason(FieldReason::NulCharacter),
            ));
        }
    }
    Ok(())
}
