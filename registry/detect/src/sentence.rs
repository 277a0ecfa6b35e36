//! The one sentence splitter: the detector reads sentence by sentence, the chunker packs long
//! paragraphs by sentences, and a skill's description shows its first sentence, all with the
//! same cuts.
//!
//! A sentence ends at a newline, at `.`, `!`, `?` or `;` followed by white space, the end of
//! the text or a CJK character (so "v1.2" and "example.com" stay whole), and at every Chinese
//! terminator (`。！？；`). Sentences are trimmed; empty ones are dropped.

use crate::normalize::is_cjk;

/// The byte ranges of the sentences of `text`, trimmed and non-empty, in order.
pub fn sentence_spans(text: &str) -> Vec<(usize, usize)> {
    let mut out = vec![];
    let mut start = 0;
    let mut push = |a: usize, b: usize| {
        let t = &text[a..b];
        let lead = t.len() - t.trim_start().len();
        let trail = t.len() - t.trim_end().len();
        if lead + trail < t.len() {
            out.push((a + lead, b - trail));
        }
    };
    let mut it = text.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        let end = i + c.len_utf8();
        let next = it.peek().map(|(_, n)| *n);
        let cut = match c {
            '\n' | '。' | '！' | '？' | '；' => true,
            '.' | '!' | '?' | ';' => next.is_none_or(|n| n.is_whitespace() || is_cjk(n)),
            _ => false,
        };
        if cut {
            push(start, end);
            start = end;
        }
    }
    push(start, text.len());
    out
}

/// The sentences of `text`, trimmed and non-empty.
pub fn sentences(text: &str) -> Vec<&str> {
    sentence_spans(text)
        .into_iter()
        .map(|(a, b)| &text[a..b])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_at_terminators_newlines_and_semicolons_not_inside_words() {
        assert_eq!(
            sentences("Use v1.2 from example.com. Then stop; really!\nNext line?  End"),
            [
                "Use v1.2 from example.com.",
                "Then stop;",
                "really!",
                "Next line?",
                "End"
            ]
        );
        assert_eq!(
            sentences("先读文件。然后运行；最后报告！Done.好"),
            ["先读文件。", "然后运行；", "最后报告！", "Done.", "好"]
        );
        assert!(sentences(" \n\t ").is_empty());
        let text = "  One.  Two  ";
        let spans = sentence_spans(text);
        assert_eq!(spans, [(2, 6), (8, 11)]);
    }
}
