//! Identity tokens: the parts of a text that tell one fact from another of the same shape —
//! numbers, ids, dates, times, quantities, codes, names, addresses. Dense embeddings barely see
//! them ("parcel 3fa9… goes to dock 4" and "parcel 77be… goes to dock 9" are near-identical
//! vectors), so the gate never merges two writes whose identity tokens differ, and a search
//! whose query holds one ranks the record that holds it first.

use std::collections::BTreeSet;

/// Whether `c` is a CJK ideograph or kana: scripts without spaces, where every character
/// carries meaning the embedding may not see.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF     // kana
        | 0x3400..=0x4DBF   // CJK extension A
        | 0x4E00..=0x9FFF   // CJK unified ideographs
        | 0xF900..=0xFAFF   // compatibility ideographs
        | 0xAC00..=0xD7AF   // Hangul syllables
        | 0x20000..=0x2FA1F)
}

/// Capitalised only because they open a sentence: never a name.
const FUNCTION_WORDS: &[&str] = &[
    "a", "after", "an", "and", "at", "before", "but", "for", "he", "her", "here", "his", "i", "if",
    "in", "it", "its", "my", "note", "of", "on", "or", "our", "please", "she", "that", "the",
    "their", "then", "there", "these", "they", "this", "those", "to", "we", "when", "you", "your",
];

/// Characters that may sit inside an identity token (`INV-2024-0042`, `v1.2.3`, `10:30`,
/// `ann@example.com`, `/srv/app`).
fn joins(c: char) -> bool {
    matches!(c, '-' | '_' | '.' | ':' | '/' | '@' | '#' | '+' | ',')
}

/// The identity tokens of `text`, lower-cased: every token with a digit; every capitalised
/// word (names, places, products); e-mail addresses and paths; and, in CJK text, every
/// character (names and places there have no capitals to find them by).
pub fn identity_tokens(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut cur = String::new();
    let flush = |cur: &mut String, out: &mut BTreeSet<String>| {
        let t = cur.trim_matches(joins);
        if !t.is_empty() {
            let has_digit = t.chars().any(|c| c.is_ascii_digit());
            let capital = t.chars().next().is_some_and(char::is_uppercase)
                && t.chars().count() > 1
                && !FUNCTION_WORDS.contains(&t.to_lowercase().as_str());
            let addressy = t.contains('@') || (t.contains('/') && t.len() > 2);
            if has_digit || capital || addressy {
                out.insert(t.to_lowercase());
            }
        }
        cur.clear();
    };
    for c in text.chars() {
        if is_cjk(c) {
            flush(&mut cur, &mut out);
            out.insert(c.to_string());
        } else if c.is_alphanumeric() || (joins(c) && !cur.is_empty()) {
            cur.push(c);
        } else {
            flush(&mut cur, &mut out);
        }
    }
    flush(&mut cur, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<String> {
        identity_tokens(s).into_iter().collect()
    }

    #[test]
    fn numbers_ids_names_and_cjk_characters_are_identity() {
        assert_eq!(
            toks("Worker 12 noted that parcel 3fa9c2d1e4b5 goes to dock 4."),
            ["12", "3fa9c2d1e4b5", "4", "worker"]
        );
        assert_eq!(
            toks("Ann moved to Berlin on 2024-05-01"),
            ["2024-05-01", "ann", "berlin"]
        );
        assert_eq!(
            toks("invoice INV-2024-0042, total $1,200."),
            ["1,200", "inv-2024-0042"]
        );
        assert_eq!(toks("write to ann@example.com"), ["ann@example.com"]);
        assert_eq!(toks("张三喜欢茶"), ["三", "喜", "张", "欢", "茶"]);
        assert!(toks("likes green tea in the morning").is_empty());
    }

    #[test]
    fn paraphrases_agree_and_different_facts_differ() {
        let a = identity_tokens("parcel 3fa9c2d1e4b5 goes to dock 4");
        let b = identity_tokens("The parcel 3fa9c2d1e4b5 is headed for dock 4");
        let c = identity_tokens("parcel 77be01c2aa93 goes to dock 9");
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
