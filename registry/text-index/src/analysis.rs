//! The text analysis of the index: one tokenizer for documents and queries alike, per script run.
//!
//! The text is NFKC-folded first (full-width Latin and digits, half-width kana, ideographic
//! space, ligatures), then cut into runs:
//!
//! * a run of alphanumeric characters outside the CJK scripts is one token, lower-cased, dropped
//!   when it is an English stop word, Porter-stemmed: exactly what tantivy's `SimpleTokenizer` +
//!   `LowerCaser` + `StopWordFilter` + `Stemmer` made of it before (format 1), so English is
//!   analysed as it was;
//! * a run of CJK characters (Han, kana, Hangul) becomes the tokens of the [`CjkAnalysis`]:
//!   jieba words of its Han parts, character bigrams of the whole run, or both;
//! * anything else separates tokens.
//!
//! Every input is bounded: a Latin token of [`MAX_TOKEN_BYTES`] or more is dropped (as before),
//! a CJK run is segmented in pieces of at most [`MAX_CJK_PIECE_CHARS`] characters, and a text
//! yields at most [`MAX_TOKENS_PER_TEXT`] tokens; the rest of a longer text is not analysed.

use std::cell::Cell;
use std::sync::LazyLock;

use jieba_rs::Jieba;
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, Stemmer, StopWordFilter, TextAnalyzer, Token,
    TokenStream, Tokenizer,
};
use unicode_normalization::UnicodeNormalization;

/// Latin tokens of this many bytes or more are dropped (the limit of format 1).
pub const MAX_TOKEN_BYTES: usize = 64;
/// A CJK run longer than this is segmented piece by piece (jieba's work stays linear).
pub const MAX_CJK_PIECE_CHARS: usize = 256;
/// Tokens one text (a document's or a query's) yields at most; the rest is not analysed.
pub const MAX_TOKENS_PER_TEXT: usize = 65_536;

/// The jieba dictionary (embedded in the binary), loaded on the first CJK text.
static JIEBA: LazyLock<Jieba> = LazyLock::new(Jieba::new);

/// How CJK runs are indexed. Latin runs are analysed the same way in every variant; the
/// variant is part of the stored format (an index opened with another one must be rebuilt).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CjkAnalysis {
    /// jieba words (default mode, HMM for unknown words); kana and Hangul as bigrams.
    Words,
    /// jieba search mode: the words plus the dictionary words of 2 and 3 characters inside them.
    SearchWords,
    /// Character bigrams of every CJK run, a single character for a run of one.
    Bigrams,
    /// Bigrams and, in the same field, the jieba words that are not bigrams themselves (words of
    /// one character or of three and more).
    #[default]
    WordsAndBigrams,
    /// jieba words in the text field and bigrams in a second field; a query asks both fields.
    WordsOrBigrams,
}

impl CjkAnalysis {
    pub const ALL: [CjkAnalysis; 5] = [
        CjkAnalysis::Words,
        CjkAnalysis::SearchWords,
        CjkAnalysis::Bigrams,
        CjkAnalysis::WordsAndBigrams,
        CjkAnalysis::WordsOrBigrams,
    ];

    /// The name recorded in the stored format.
    pub fn name(self) -> &'static str {
        match self {
            CjkAnalysis::Words => "words",
            CjkAnalysis::SearchWords => "search_words",
            CjkAnalysis::Bigrams => "bigrams",
            CjkAnalysis::WordsAndBigrams => "words_bigrams",
            CjkAnalysis::WordsOrBigrams => "words_or_bigrams",
        }
    }

    pub fn from_name(name: &str) -> Option<CjkAnalysis> {
        CjkAnalysis::ALL.into_iter().find(|a| a.name() == name)
    }

    /// What the main text field's analyzer emits.
    pub(crate) fn text_emit(self) -> Emit {
        let (words, bigrams) = match self {
            CjkAnalysis::Words | CjkAnalysis::WordsOrBigrams => (Some(WordMode::Default), false),
            CjkAnalysis::SearchWords => (Some(WordMode::Search), false),
            CjkAnalysis::Bigrams => (None, true),
            CjkAnalysis::WordsAndBigrams => (Some(WordMode::Default), true),
        };
        Emit {
            latin: true,
            words,
            bigrams,
        }
    }

    /// What the second (bigram) field's analyzer emits, for the variant that has one.
    pub(crate) fn bigram_field_emit(self) -> Option<Emit> {
        (self == CjkAnalysis::WordsOrBigrams).then_some(Emit {
            latin: false,
            words: None,
            bigrams: true,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WordMode {
    Default,
    Search,
}

/// Which tokens the tokenizer emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Emit {
    /// Latin-script (non-CJK alphanumeric) tokens.
    pub latin: bool,
    /// jieba words of Han runs (kana and Hangul runs as bigrams when `bigrams` is off).
    pub words: Option<WordMode>,
    /// Character bigrams of CJK runs (a single character for a run of one).
    pub bigrams: bool,
}

/// The full analyzer: the mixed-script tokenizer, then the English filters of format 1. The
/// filters leave CJK tokens as they are (no case, not in the stop list, no Latin suffix).
pub(crate) fn analyzer(emit: Emit) -> TextAnalyzer {
    let stop = StopWordFilter::new(Language::English)
        .expect("tantivy is built with its default `stopwords` feature");
    TextAnalyzer::builder(MixedScriptTokenizer { emit })
        .filter(RemoveLongFilter::limit(MAX_TOKEN_BYTES))
        .filter(LowerCaser)
        .filter(stop)
        .filter(Stemmer::new(Language::English))
        .build()
}

use registry_core::text::{CjkScript as Script, cjk_script};

/// Splits NFKC-folded text into Latin tokens and the tokens of CJK runs (see the module doc).
#[derive(Debug, Clone)]
pub(crate) struct MixedScriptTokenizer {
    emit: Emit,
}

impl Tokenizer for MixedScriptTokenizer {
    type TokenStream<'a> = BufferedTokens;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> BufferedTokens {
        let mut out = BufferedTokens::default();
        analyse(text, self.emit, &mut out);
        out
    }
}

/// The tokens of one text, in one string buffer; `advance` copies the next into `token`.
#[derive(Debug, Default)]
pub(crate) struct BufferedTokens {
    text: String,
    /// Per token: its end in `text`, and its byte offsets in the source (approximate where NFKC
    /// changed the text, always within it and never decreasing).
    spans: Vec<(usize, usize, usize)>,
    next: usize,
    token: Token,
}

impl BufferedTokens {
    fn full(&self) -> bool {
        self.spans.len() >= MAX_TOKENS_PER_TEXT
    }

    fn push(&mut self, word: &str, from: usize, to: usize) {
        if self.full() {
            return;
        }
        self.text.push_str(word);
        self.spans.push((self.text.len(), from, to));
    }

    fn push_chars(&mut self, chars: &[char], from: usize, to: usize) {
        if self.full() {
            return;
        }
        self.text.extend(chars);
        self.spans.push((self.text.len(), from, to));
    }
}

impl TokenStream for BufferedTokens {
    fn advance(&mut self) -> bool {
        let Some(&(end, from, to)) = self.spans.get(self.next) else {
            return false;
        };
        let start = match self.next {
            0 => 0,
            i => self.spans[i - 1].0,
        };
        self.token.text.clear();
        self.token.text.push_str(&self.text[start..end]);
        self.token.offset_from = from;
        self.token.offset_to = to;
        // Ordinal positions: strictly increasing, whatever the mix of words and bigrams.
        self.token.position = self.next;
        self.token.position_length = 1;
        self.next += 1;
        true
    }

    fn token(&self) -> &Token {
        &self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
    }
}

/// A Latin run being collected.
#[derive(Default)]
struct LatinRun {
    chars: Vec<char>,
    /// Source offset where the run began.
    from: usize,
    bytes: usize,
    /// The run reached [`MAX_TOKEN_BYTES`]: it is dropped, the rest of it skipped.
    too_long: bool,
}

/// A CJK run being collected, with each character's script and source offset.
#[derive(Default)]
struct CjkRun {
    chars: Vec<char>,
    scripts: Vec<Script>,
    offsets: Vec<usize>,
}

impl CjkRun {
    /// Source offsets of characters `start..end` of the run, `to` being where the run ends.
    fn span(&self, start: usize, end: usize, to: usize) -> (usize, usize) {
        let from = self.offsets[start].min(to);
        let until = self.offsets.get(end).map_or(to, |&o| o.min(to));
        (from, until.max(from))
    }
}

fn analyse(text: &str, emit: Emit, out: &mut BufferedTokens) {
    // The source offset reached by the normaliser: the end of the last source character it read.
    let read = Cell::new(0usize);
    let source = text.char_indices().map(|(i, c)| {
        read.set(i + c.len_utf8());
        c
    });
    let mut latin = LatinRun::default();
    let mut cjk = CjkRun::default();
    // Stream-safe: a run of combining marks cannot make the normaliser buffer without bound.
    for c in source.stream_safe().nfkc() {
        if out.full() {
            return;
        }
        // The normaliser reads ahead by a few characters at most, so this is where the character
        // began give or take a combining sequence: enough for offsets nobody slices text with.
        let at = read.get().saturating_sub(c.len_utf8());
        if let Some(script) = cjk_script(c) {
            flush_latin(&mut latin, at, emit, out);
            cjk.chars.push(c);
            cjk.scripts.push(script);
            cjk.offsets.push(at);
            if cjk.chars.len() == MAX_CJK_PIECE_CHARS {
                flush_cjk(&mut cjk, read.get(), emit, out);
            }
        } else if c.is_alphanumeric() {
            flush_cjk(&mut cjk, at, emit, out);
            if latin.bytes == 0 {
                latin.from = at;
            }
            latin.bytes += c.len_utf8();
            if latin.bytes >= MAX_TOKEN_BYTES {
                latin.too_long = true;
                latin.chars.clear();
            } else {
                latin.chars.push(c);
            }
        } else {
            flush_latin(&mut latin, at, emit, out);
            flush_cjk(&mut cjk, at, emit, out);
        }
    }
    flush_latin(&mut latin, text.len(), emit, out);
    flush_cjk(&mut cjk, text.len(), emit, out);
}

fn flush_latin(run: &mut LatinRun, to: usize, emit: Emit, out: &mut BufferedTokens) {
    if emit.latin && !run.too_long && !run.chars.is_empty() {
        out.push_chars(&run.chars, run.from.min(to), to);
    }
    run.chars.clear();
    run.bytes = 0;
    run.too_long = false;
}

fn flush_cjk(run: &mut CjkRun, to: usize, emit: Emit, out: &mut BufferedTokens) {
    if run.chars.is_empty() {
        return;
    }
    if emit.bigrams {
        bigrams(run, 0, run.chars.len(), to, out);
    }
    if let Some(mode) = emit.words {
        let mut start = 0;
        while start < run.chars.len() {
            let script = run.scripts[start];
            let len = run.scripts[start..]
                .iter()
                .take_while(|s| **s == script)
                .count();
            if script == Script::Han {
                words(run, start, start + len, mode, emit.bigrams, to, out);
            } else if !emit.bigrams {
                // jieba knows no kana or Hangul words; bigrams find them.
                bigrams(run, start, start + len, to, out);
            }
            start += len;
        }
    }
    run.chars.clear();
    run.scripts.clear();
    run.offsets.clear();
}

/// Bigrams of characters `start..end` of the run; the character itself when it is alone.
fn bigrams(run: &CjkRun, start: usize, end: usize, to: usize, out: &mut BufferedTokens) {
    if end - start == 1 {
        let (from, until) = run.span(start, end, to);
        out.push_chars(&run.chars[start..end], from, until);
    }
    for i in start..end.saturating_sub(1) {
        let (from, until) = run.span(i, i + 2, to);
        out.push_chars(&run.chars[i..i + 2], from, until);
    }
}

/// jieba words of the Han characters `start..end` of the run; with `skip_bigrams`, the words
/// the bigrams already index are left out (those of two characters, and the character of a run
/// of one).
fn words(
    run: &CjkRun,
    start: usize,
    end: usize,
    mode: WordMode,
    skip_bigrams: bool,
    to: usize,
    out: &mut BufferedTokens,
) {
    let piece: String = run.chars[start..end].iter().collect();
    let tokens = match mode {
        WordMode::Default => JIEBA.cut(&piece, true),
        WordMode::Search => JIEBA.cut_for_search(&piece, true),
    };
    for t in tokens {
        if skip_bigrams && (t.end - t.start == 2 || run.chars.len() == 1) {
            continue;
        }
        let (from, until) = run.span(start + t.start, start + t.end, to);
        out.push(t.word, from, until);
    }
}

#[cfg(test)]
mod tests {
    use tantivy::tokenizer::SimpleTokenizer;

    use super::*;

    fn tokens(a: &mut TextAnalyzer, text: &str) -> Vec<String> {
        let mut s = a.token_stream(text);
        let mut v = vec![];
        while s.advance() {
            v.push(s.token().text.clone());
        }
        v
    }

    /// The analyzer of format 1.
    fn format_1() -> TextAnalyzer {
        TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(RemoveLongFilter::limit(64))
            .filter(LowerCaser)
            .filter(StopWordFilter::new(Language::English).unwrap())
            .filter(Stemmer::new(Language::English))
            .build()
    }

    fn default_analyzer() -> TextAnalyzer {
        analyzer(CjkAnalysis::default().text_emit())
    }

    #[test]
    fn latin_text_is_analysed_as_in_format_1() {
        let texts = [
            "She was Running the deployments, and the cat's toys were everywhere!",
            "Error E4012 means the upload exceeded the storage quota (v2.3.1-beta).",
            "Café naïve résumé Straße ΑΘΗΝΑ Москва 123abc",
            "a-very-long-hyphenated_word_with_underscores_that_is_long_enough_to_matter xyz",
            &"x".repeat(63),
            &"y".repeat(64),
            &format!("{} tail", "z".repeat(500)),
            "",
            "   \n\t ",
        ];
        for t in texts {
            assert_eq!(
                tokens(&mut default_analyzer(), t),
                tokens(&mut format_1(), t),
                "{t:?}"
            );
        }
    }

    /// Every SciFact abstract (English, with Greek letters, accents, symbols) is analysed as in
    /// format 1, unless NFKC folds one of its characters (`µ`, `²`, ligatures…).
    #[test]
    fn scifact_abstracts_are_analysed_as_in_format_1() {
        let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
        let corpus = std::fs::read_to_string(data.join("scifact/corpus.jsonl"))
            .expect("fixtures/scifact/corpus.jsonl");
        let (mut same, mut folded) = (0, 0);
        for line in corpus.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let text = format!(
                "{}\n{}",
                v["title"].as_str().unwrap(),
                v["text"].as_str().unwrap()
            );
            let nfkc: String = text.nfkc().collect();
            if nfkc != text {
                folded += 1;
                continue;
            }
            assert_eq!(
                tokens(&mut default_analyzer(), &text),
                tokens(&mut format_1(), &text),
                "{text}"
            );
            same += 1;
        }
        println!("scifact: {same} lines analysed as in format 1, {folded} changed by NFKC");
        assert!(same > 900, "{same}");
    }

    #[test]
    fn chinese_runs_become_bigrams_and_words() {
        let mut a = default_analyzer();
        assert_eq!(tokens(&mut a, "书"), ["书"]);
        assert_eq!(tokens(&mut a, "报告"), ["报告"]);
        let t = tokens(&mut a, "中华人民共和国成立了");
        for b in ["中华", "华人", "人民", "共和", "和国", "成立", "立了"] {
            assert!(t.contains(&b.to_string()), "{b} in {t:?}");
        }
        assert!(t.contains(&"中华人民共和国".to_string()), "{t:?}");
        assert!(t.contains(&"了".to_string()), "one-character word: {t:?}");
    }

    #[test]
    fn mixed_text_is_cut_per_run() {
        let mut a = default_analyzer();
        let t = tokens(&mut a, "部署Kubernetes集群");
        assert_eq!(t, ["部署", "kubernet", "集群"]);
        let w = analyzer(CjkAnalysis::Words.text_emit());
        assert_eq!(
            tokens(&mut w.clone(), "我们用Rust写服务器"),
            ["我们", "用", "rust", "写", "服务器"]
        );
    }

    #[test]
    fn full_width_forms_fold() {
        let mut a = default_analyzer();
        assert_eq!(tokens(&mut a, "ＲＵＳＴ１２３"), tokens(&mut a, "rust123"));
        assert_eq!(tokens(&mut a, "ｶﾀｶﾅ"), tokens(&mut a, "カタカナ"));
        assert_eq!(tokens(&mut a, "数据　库"), tokens(&mut a, "数据 库"));
    }

    #[test]
    fn kana_and_hangul_become_bigrams() {
        let mut a = default_analyzer();
        assert_eq!(tokens(&mut a, "カタカナ"), ["カタ", "タカ", "カナ"]);
        assert_eq!(tokens(&mut a, "한국어"), ["한국", "국어"]);
        // Kanji and kana in one run: bigrams across the run, jieba words of the kanji.
        let t = tokens(&mut a, "東京に住む");
        assert_eq!(t[..4], ["東京", "京に", "に住", "住む"]);
        let mut w = analyzer(CjkAnalysis::Words.text_emit());
        assert_eq!(tokens(&mut w, "한국어"), ["한국", "국어"]);
    }

    #[test]
    fn english_filters_leave_cjk_tokens_alone() {
        // The stemmer and the stop list see every token; none may change a CJK one.
        let mut a = default_analyzer();
        let mut raw = TextAnalyzer::builder(MixedScriptTokenizer {
            emit: CjkAnalysis::default().text_emit(),
        })
        .build();
        let text = "中文分词需要词典和统计模型。日本語のテキストも。한국어 텍스트도.";
        assert_eq!(tokens(&mut a, text), tokens(&mut raw, text));
    }

    #[test]
    fn token_count_and_length_are_bounded() {
        let mut a = default_analyzer();
        let huge = "汉".repeat(4 * 1024 * 1024 / 3);
        let t = tokens(&mut a, &huge);
        assert!(t.len() <= MAX_TOKENS_PER_TEXT, "{}", t.len());
        assert!(t.len() > 1000, "a long run still yields tokens");
        assert!(t.iter().all(|w| w.len() < MAX_TOKEN_BYTES));
        let latin = "q".repeat(4 * 1024 * 1024);
        assert!(tokens(&mut a, &latin).is_empty());
        let many = "ab ".repeat(200_000);
        assert_eq!(tokens(&mut a, &many).len(), MAX_TOKENS_PER_TEXT);
        // Combining marks without a base: the normaliser's buffer stays bounded.
        let marks = "\u{0301}".repeat(1_000_000);
        assert!(tokens(&mut a, &marks).len() <= MAX_TOKENS_PER_TEXT);
    }

    #[test]
    fn offsets_stay_within_the_source() {
        let mut a = default_analyzer();
        for text in ["ﷺﷺ abc ﷺ", "ＲＵＳＴ中文ｶﾀｶﾅ", "x\u{0301}\u{0301}y 数据"]
        {
            let mut s = a.token_stream(text);
            while s.advance() {
                let t = s.token();
                assert!(
                    t.offset_from <= t.offset_to && t.offset_to <= text.len(),
                    "{text:?}: {t:?}"
                );
            }
        }
    }
}
