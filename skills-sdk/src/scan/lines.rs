//! One file read as lines: what kind it is, its lines with their context (prose, code, comment,
//! quoted as an example), the regions hidden from a reader, and where findings go.

use std::sync::LazyLock;

use regex::Regex;

use super::{FindingSeverity, Findings, QUOTED_NOTE};

/// What a file is, by name and first line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Markdown or HTML: prose, fenced code, quotations, comments.
    Markup,
    /// Plain text: prose.
    Text,
    /// JSON, YAML, TOML, INI: configuration; read by every rule.
    Data,
    /// A script; `hash` when `#` starts a comment, `slash` for `//`, `dash` for `--`.
    Script(Comments),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Comments {
    Hash,
    Slash,
    Dash,
    Rem,
}

pub(crate) fn kind_of(path: &str, text: &str) -> Option<Kind> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let lower = name.to_ascii_lowercase();
    let ext = lower.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    let by_ext = match ext {
        "md" | "markdown" | "mdx" | "html" | "htm" | "xhtml" => Some(Kind::Markup),
        "txt" | "rst" | "adoc" | "text" | "prompt" | "j2" | "jinja" | "tmpl" | "tpl" => {
            Some(Kind::Text)
        }
        "json" | "jsonc" | "yaml" | "yml" | "toml" | "ini" | "cfg" | "conf" | "env" | "plist"
        | "xml" | "service" | "desktop" => Some(Kind::Data),
        "py" | "pyw" | "sh" | "bash" | "zsh" | "ksh" | "fish" | "ps1" | "psm1" | "psd1" | "rb"
        | "pl" | "pm" | "r" | "tcl" | "awk" | "mk" => Some(Kind::Script(Comments::Hash)),
        "js" | "mjs" | "cjs" | "ts" | "mts" | "cts" | "jsx" | "tsx" | "go" | "rs" | "java"
        | "kt" | "swift" | "c" | "cc" | "cpp" | "h" | "cs" | "php" | "scala" | "groovy" => {
            Some(Kind::Script(Comments::Slash))
        }
        "sql" | "lua" => Some(Kind::Script(Comments::Dash)),
        "bat" | "cmd" | "vbs" => Some(Kind::Script(Comments::Rem)),
        _ => None,
    };
    if let Some(k) = by_ext {
        return Some(k);
    }
    if text.starts_with("#!") {
        return Some(Kind::Script(Comments::Hash));
    }
    match lower.as_str() {
        "makefile" | "dockerfile" | "containerfile" | "justfile" | "procfile" | "gemfile"
        | "rakefile" | "vagrantfile" => Some(Kind::Script(Comments::Hash)),
        _ if lower.starts_with('.') && (lower.ends_with("rc") || lower.ends_with("profile")) => {
            Some(Kind::Script(Comments::Hash))
        }
        // Anything else that reads as text is read as text: the instruction and hidden-text
        // rules apply to every file an agent might be shown.
        _ => Some(Kind::Text),
    }
}

/// Where a line sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// Running text (Markdown prose, plain text).
    Prose,
    /// Code: a script's code lines, a fenced block, configuration.
    Code,
    /// A comment in a script.
    Comment,
}

/// One line and what the rules need to know about it.
#[derive(Debug, Clone)]
pub(crate) struct Line<'a> {
    /// 1-based.
    pub no: usize,
    pub raw: &'a str,
    /// NFKC, invisible characters removed, lower case.
    pub low: String,
    pub place: Place,
    /// Shown as an example (a labelled fenced block or quotation, an inline code span in a
    /// sentence about attacks): a fail found here is reported as a warning.
    pub example: bool,
    /// The unit a pairing rule looks within: 0 for a script's whole file and for Markdown
    /// prose, one number per fenced block.
    pub unit: usize,
}

/// Where the findings of one file go: applies the example downgrade.
pub(crate) struct Sink<'a> {
    pub out: &'a mut Findings,
    pub file: &'a str,
    /// Set when anything at all was reported through this sink (the hidden-text rules read
    /// their region through a sink of their own to know whether it holds anything).
    pub hits: usize,
}

impl Sink<'_> {
    pub(crate) fn hit(
        &mut self,
        rule: &'static str,
        severity: FindingSeverity,
        line: &Line<'_>,
        message: impl Into<String>,
    ) {
        let mut message = message.into();
        let mut severity = severity;
        if line.example && severity == FindingSeverity::Fail {
            severity = FindingSeverity::Warn;
            message = format!("{message} {QUOTED_NOTE}");
        }
        self.hits += 1;
        self.out
            .push(rule, severity, self.file, line.no, line.raw, message);
    }
}

/// Zero-width and other invisible characters that have no business inside a skill's text
/// (their legitimate uses — emoji sequences, joining scripts, a leading BOM — are told apart
/// where they are found).
pub(crate) fn is_suspicious_invisible(c: char) -> bool {
    matches!(c,
        '\u{200B}'..='\u{200F}'
        | '\u{2060}'..='\u{2064}'
        | '\u{FEFF}'
        | '\u{180E}'
        | '\u{034F}'
        | '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}'
        | '\u{17B4}' | '\u{17B5}'
        | '\u{FE00}'..='\u{FE0F}'
        | '\u{E0000}'..='\u{E007F}'
        | '\u{E0100}'..='\u{E01EF}')
}

/// Bidirectional embedding, override and isolate controls (Trojan Source).
pub(crate) fn is_bidi(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{061C}')
}

pub(crate) fn lower(raw: &str) -> String {
    let visible: String = raw
        .chars()
        .filter(|c| !is_suspicious_invisible(*c) && !is_bidi(*c))
        .collect();
    registry_detect::normalize::visible_nfkc(&visible).to_lowercase()
}

/// A file's lines with the regions the hidden-text rules read.
#[derive(Debug, Default)]
pub(crate) struct Doc<'a> {
    pub lines: Vec<Line<'a>>,
    /// HTML comments and hidden elements: (first line number, their lines).
    pub comments: Vec<(usize, Vec<Line<'a>>)>,
    /// Text after the first long run of blank lines: (first line number, run length, its
    /// lines).
    pub after_blank: Option<(usize, usize, Vec<Line<'a>>)>,
    /// Text after a long run of spaces inside a line.
    pub after_space: Vec<Line<'a>>,
}

/// A run of at least this many blank lines hides what follows it from a reader.
pub(crate) const BLANK_RUN: usize = 20;
/// A run of at least this many spaces or tabs inside a line hides what follows on the line.
pub(crate) const SPACE_RUN: usize = 100;

fn mk_line(no: usize, raw: &str, place: Place, example: bool, unit: usize) -> Line<'_> {
    Line {
        no,
        raw,
        low: lower(raw),
        place,
        example,
        unit,
    }
}

pub(crate) fn plain_lines(text: &str, place: Place) -> Doc<'_> {
    let mut doc = Doc::default();
    let mut blank = 0usize;
    for (i, raw) in text.lines().enumerate() {
        let line = mk_line(i + 1, raw, place, false, 0);
        note_blank_run(&mut doc, &mut blank, &line);
        doc.lines.push(line);
    }
    doc
}

/// Tracks runs of blank lines (and long runs of spaces inside a line) for
/// `hidden.after_blank_run`: the text after the first long blank run, to the end of the file
/// (at most 200 lines), and each line's text after a long run of spaces.
fn note_blank_run<'a>(doc: &mut Doc<'a>, blank: &mut usize, line: &Line<'a>) {
    if line.raw.trim().is_empty() {
        *blank += 1;
        return;
    }
    if *blank >= BLANK_RUN && doc.after_blank.is_none() {
        doc.after_blank = Some((line.no, *blank, vec![]));
    }
    *blank = 0;
    if let Some((_, _, region)) = &mut doc.after_blank
        && region.len() < 200
    {
        region.push(line.clone());
    }
    if let Some(rest) = after_space_run(line.raw) {
        let mut l = line.clone();
        l.raw = rest;
        l.low = lower(rest);
        doc.after_space.push(l);
    }
}

/// The text after a run of at least [`SPACE_RUN`] spaces or tabs.
fn after_space_run(raw: &str) -> Option<&str> {
    let mut run = 0usize;
    for (i, c) in raw.char_indices() {
        if c == ' ' || c == '\t' {
            run += 1;
        } else {
            if run >= SPACE_RUN {
                return Some(&raw[i..]);
            }
            run = 0;
        }
    }
    None
}

static EXAMPLE_LABEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"\b(examples?|e\.g\.|for instance|samples?|illustrat\w*|attacks?|attackers?|malicious|malware|exploits?|phishing|payloads?|red.flags?|warning signs?|suspicious|indicators?|iocs?",
        r"|do not (run|execute|copy|use)|never (run|execute)|don'?t (run|execute)|dangerous|anti.?patterns?|unsafe|vulnerab\w*|prompt injections?|jailbreaks?|threats?|adversar\w*)\b"
    ))
    .expect("example label")
});

static IMPERATIVE_SECTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"setup|set up|install|prerequisite|requirement|getting started|quick ?start|usage|before you|first,? run|step \d|bootstrap|configure",
    )
    .expect("imperative section")
});

/// Whether a quotation with these surroundings is an example: its own label (a fence's info
/// string), the nearest heading or the lines just before it say so, and the section is not one
/// that tells the reader to run things (setup, install, prerequisites, usage).
fn is_example(label: &str, heading: &str, before: &[String]) -> bool {
    if IMPERATIVE_SECTION.is_match(heading) || IMPERATIVE_SECTION.is_match(label) {
        return false;
    }
    EXAMPLE_LABEL.is_match(label)
        || EXAMPLE_LABEL.is_match(heading)
        || before.iter().any(|b| EXAMPLE_LABEL.is_match(b))
}

pub(crate) fn markup_lines(text: &str) -> Doc<'_> {
    let mut doc = Doc::default();
    let mut fence: Option<(String, bool)> = None; // (marker, example)
    let mut unit = 0usize;
    let mut heading = String::new();
    let mut before: Vec<String> = vec![];
    let mut comment: Option<(usize, Vec<Line<'_>>)> = None;
    let mut blank = 0usize;
    let mut in_front_matter = text.starts_with("---");
    for (i, raw) in text.lines().enumerate() {
        let no = i + 1;
        let t = raw.trim_start();
        if in_front_matter {
            if i > 0 && raw.trim_end() == "---" {
                in_front_matter = false;
            }
            doc.lines.push(mk_line(no, raw, Place::Prose, false, 0));
            continue;
        }
        if let Some((marker, example)) = &fence {
            if t.starts_with(marker.as_str())
                && t.trim_start_matches(marker.as_str()).trim().is_empty()
            {
                fence = None;
                continue;
            }
            let example = *example;
            doc.lines.push(mk_line(no, raw, Place::Code, example, unit));
            continue;
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            let marker: String = t.chars().take_while(|c| *c == '`' || *c == '~').collect();
            let label = lower(t.trim_start_matches(marker.as_str()));
            let example = is_example(&label, &heading, &before);
            unit += 1;
            fence = Some((marker, example));
            continue;
        }
        // HTML comments (possibly over several lines) and hidden elements.
        if let Some((_, lines)) = &mut comment {
            let (inside, closed) = match raw.find("-->") {
                Some(end) => (&raw[..end], true),
                None => (raw, false),
            };
            lines.push(mk_line(no, inside, Place::Prose, false, 0));
            if closed {
                let c = comment.take().expect("open comment");
                doc.comments.push(c);
            }
            continue;
        }
        let mut visible = raw.to_string();
        if let Some(start) = raw.find("<!--") {
            let rest = &raw[start + 4..];
            match rest.find("-->") {
                Some(end) => {
                    doc.comments
                        .push((no, vec![mk_line(no, &rest[..end], Place::Prose, false, 0)]));
                    let mut tail = &rest[end + 3..];
                    // Further comments on the same line.
                    while let Some(s) = tail.find("<!--") {
                        let r = &tail[s + 4..];
                        let e = r.find("-->").unwrap_or(r.len());
                        doc.comments
                            .push((no, vec![mk_line(no, &r[..e], Place::Prose, false, 0)]));
                        tail = r.get(e + 3..).unwrap_or("");
                    }
                    visible = raw[..start].to_string();
                }
                None => {
                    comment = Some((no, vec![mk_line(no, rest, Place::Prose, false, 0)]));
                    visible = raw[..start].to_string();
                }
            }
        }
        if let Some(h) = hidden_element(raw) {
            doc.comments
                .push((no, vec![mk_line(no, h, Place::Prose, false, 0)]));
        }
        let low = lower(&visible);
        if t.starts_with('#') {
            heading = low.clone();
            before.clear();
        }
        let quoted = t.starts_with('>') || visible.contains('`');
        let example = quoted && {
            let mut ctx = before.clone();
            ctx.push(low.clone());
            is_example("", &heading, &ctx)
        };
        let line = Line {
            no,
            raw,
            low: low.clone(),
            place: Place::Prose,
            example,
            unit: 0,
        };
        note_blank_run(&mut doc, &mut blank, &line);
        doc.lines.push(line);
        if !low.trim().is_empty() {
            before.push(low);
            if before.len() > 3 {
                before.remove(0);
            }
        }
    }
    if let Some(c) = comment {
        doc.comments.push(c);
    }
    doc
}

static HIDDEN_ELEMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)<(\w+)[^>]*(display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(px)?\b|\bhidden\b|aria-hidden="true")[^>]*>([^<]{8,})"#,
    )
    .expect("hidden element")
});

/// The text of an element styled to be invisible on the same line.
fn hidden_element(raw: &str) -> Option<&str> {
    HIDDEN_ELEMENT
        .captures(raw)
        .and_then(|c| c.get(4))
        .map(|m| m.as_str())
}

pub(crate) fn script_lines(text: &str, comments: Comments) -> Doc<'_> {
    let mut doc = Doc::default();
    let mut blank = 0usize;
    let mut in_block = false; // /* … */, <# … #>, """ docstrings are read as code
    for (i, raw) in text.lines().enumerate() {
        let t = raw.trim_start();
        let place = if in_block {
            if t.contains("*/") || t.contains("#>") {
                in_block = false;
            }
            Place::Comment
        } else {
            match comments {
                Comments::Hash if t.starts_with("<#") => {
                    in_block = !t.contains("#>");
                    Place::Comment
                }
                Comments::Hash if t.starts_with('#') && !t.starts_with("#!") => Place::Comment,
                Comments::Slash if t.starts_with("//") => Place::Comment,
                Comments::Slash if t.starts_with("/*") => {
                    in_block = !t.contains("*/");
                    Place::Comment
                }
                Comments::Dash if t.starts_with("--") => Place::Comment,
                Comments::Rem
                    if t.to_ascii_lowercase().starts_with("rem ") || t.starts_with("::") =>
                {
                    Place::Comment
                }
                _ => Place::Code,
            }
        };
        let line = mk_line(i + 1, raw, place, false, 0);
        note_blank_run(&mut doc, &mut blank, &line);
        doc.lines.push(line);
    }
    doc
}

/// Runs of prose (and of script comments) for the detector: paragraphs joined up to about
/// 1,000 bytes, each with its first line. Quoted example lines are left out (the detector is
/// for what the agent is told, not for what it is shown).
pub(crate) fn prose_blocks<'a, 'b>(lines: &'b [Line<'a>]) -> Vec<Vec<&'b Line<'a>>> {
    let mut blocks: Vec<Vec<&Line<'_>>> = vec![];
    let mut cur: Vec<&Line<'_>> = vec![];
    let mut bytes = 0usize;
    for l in lines {
        let prose = matches!(l.place, Place::Prose | Place::Comment);
        let text = l.low.trim();
        let breaks = !prose || text.is_empty() || l.example;
        if breaks || bytes + text.len() > 1000 {
            if !cur.is_empty() {
                blocks.push(std::mem::take(&mut cur));
            }
            bytes = 0;
            if breaks {
                continue;
            }
        }
        bytes += text.len() + 1;
        cur.push(l);
    }
    if !cur.is_empty() {
        blocks.push(cur);
    }
    blocks
}
