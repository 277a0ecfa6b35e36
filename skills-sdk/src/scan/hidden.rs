//! Hidden text: invisible, bidirectional and tag characters; text in HTML comments or hidden
//! elements; text after long runs of blank lines or spaces.

use super::FindingSeverity::{Fail, Warn};
use super::lines::{Doc, Line, Place, Sink, is_bidi, is_suspicious_invisible};
use super::{instructions, scripts};

fn is_tag(c: char) -> bool {
    matches!(c, '\u{E0000}'..='\u{E007F}')
}

fn is_emojiish(c: char) -> bool {
    let u = c as u32;
    (0x1F000..=0x1FAFF).contains(&u)
        || (0x2600..=0x27BF).contains(&u)
        || (0x2190..=0x21FF).contains(&u)
        || (0x2300..=0x23FF).contains(&u)
        || (0x2B00..=0x2BFF).contains(&u)
        || (0x1F3FB..=0x1F3FF).contains(&u)
        || c == '\u{FE0F}'
        || c == '\u{20E3}'
        || c == '\u{00A9}'
        || c == '\u{00AE}'
        || c == '\u{2122}'
}

fn is_rtl(c: char) -> bool {
    matches!(c as u32, 0x0590..=0x08FF | 0xFB1D..=0xFDFF | 0xFE70..=0xFEFF)
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x3134F)
}

/// Whether the invisible character `c` between `prev` and `next` is an ordinary part of the
/// text: an emoji joiner or presentation selector, a joiner in a script that needs one, a
/// direction mark in right-to-left text, a byte-order mark at the start.
fn legitimate(
    c: char,
    prev: Option<char>,
    next: Option<char>,
    at_start: bool,
    rtl_line: bool,
) -> bool {
    let letter_non_ascii = |x: Option<char>| x.is_some_and(|x| x.is_alphabetic() && !x.is_ascii());
    match c {
        '\u{FEFF}' => at_start,
        '\u{200D}' => {
            (prev.is_some_and(is_emojiish) && next.is_some_and(is_emojiish))
                || (letter_non_ascii(prev) && letter_non_ascii(next))
        }
        '\u{200C}' => letter_non_ascii(prev),
        '\u{200E}' | '\u{200F}' => rtl_line,
        '\u{FE00}'..='\u{FE0F}' => prev.is_some_and(|p| {
            is_emojiish(p)
                || p.is_ascii_digit()
                || p == '#'
                || p == '*'
                || (!p.is_ascii() && !is_suspicious_invisible(p))
        }),
        '\u{E0100}'..='\u{E01EF}' => prev.is_some_and(is_cjk),
        '\u{E0000}'..='\u{E007F}' => false,
        _ => false,
    }
}

/// Reads every character of a text file for invisible, bidi and tag characters.
pub(crate) fn scan_chars(text: &str, sink: &mut Sink<'_>) {
    let mut invisible = (0usize, 0usize, None::<usize>); // count, longest run, first line
    let mut bidi = (0usize, None::<usize>);
    let mut tags = (0usize, None::<usize>);
    let mut selectors_run = 0usize;
    let mut first_bytes = 0usize;
    for (i, line) in text.lines().enumerate() {
        let no = i + 1;
        if !line
            .chars()
            .any(|c| is_suspicious_invisible(c) || is_bidi(c))
        {
            first_bytes += line.len() + 1;
            continue;
        }
        let rtl_line = line.chars().any(is_rtl);
        let chars: Vec<char> = line.chars().collect();
        let mut run = 0usize;
        let mut flag_sequence = false;
        for (j, &c) in chars.iter().enumerate() {
            let prev = j.checked_sub(1).map(|k| chars[k]);
            let next = chars.get(j + 1).copied();
            if c == '\u{1F3F4}' {
                flag_sequence = true;
            } else if !is_tag(c) {
                flag_sequence = false;
            }
            if is_bidi(c) {
                bidi.0 += 1;
                bidi.1.get_or_insert(no);
                continue;
            }
            if !is_suspicious_invisible(c) {
                run = 0;
                selectors_run = 0;
                continue;
            }
            if is_tag(c) {
                if !flag_sequence {
                    tags.0 += 1;
                    tags.1.get_or_insert(no);
                }
                continue;
            }
            if matches!(c, '\u{FE00}'..='\u{FE0F}' | '\u{E0100}'..='\u{E01EF}') {
                selectors_run += 1;
                if selectors_run >= 2 {
                    tags.0 += 1;
                    tags.1.get_or_insert(no);
                    continue;
                }
            }
            let at_start = first_bytes == 0 && j == 0;
            if legitimate(c, prev, next, at_start, rtl_line) {
                run = 0;
                continue;
            }
            run += 1;
            invisible.0 += 1;
            invisible.1 = invisible.1.max(run);
            invisible.2.get_or_insert(no);
        }
        first_bytes += line.len() + 1;
    }
    let line_of = |no: usize| text.lines().nth(no - 1).unwrap_or("");
    let at = |no: usize| Line {
        no,
        raw: line_of(no),
        low: String::new(),
        place: Place::Prose,
        example: false,
        unit: 0,
    };
    if let Some(no) = invisible.2 {
        let severity = if invisible.0 >= 3 || invisible.1 >= 2 {
            Fail
        } else {
            Warn
        };
        sink.hit(
            "hidden.invisible",
            severity,
            &at(no),
            format!(
                "{} zero-width or invisible character(s) inside the text (longest run {})",
                invisible.0, invisible.1
            ),
        );
    }
    if let Some(no) = bidi.1 {
        sink.hit(
            "hidden.bidi",
            Fail,
            &at(no),
            format!(
                "{} bidirectional control character(s): the text shown differs from the text read",
                bidi.0
            ),
        );
    }
    if let Some(no) = tags.1 {
        sink.hit(
            "hidden.tags",
            Fail,
            &at(no),
            format!(
                "{} tag or stacked variation-selector character(s): invisible text",
                tags.0
            ),
        );
    }
}

/// Reads what a file hides: HTML comments and hidden elements, text after a long blank run,
/// text after a long run of spaces. Hidden text that is instruction-like or carries a flagged
/// command fails.
pub(crate) fn scan_regions(doc: &Doc<'_>, sink: &mut Sink<'_>) {
    for (first, lines) in &doc.comments {
        let before = sink.hits;
        for l in lines {
            instructions::line_rules(l, sink);
        }
        let refs: Vec<&Line<'_>> = lines.iter().collect();
        scripts::scan_lines(&refs, super::lines::Kind::Text, sink);
        let instruction_like = instructions::detector_rules(std::slice::from_ref(&refs), sink)
            || lines.iter().any(|l| instructions::addresses_agent(&l.low));
        if sink.hits > before || instruction_like {
            let at = lines.first().cloned().unwrap_or_else(|| Line {
                no: *first,
                raw: "",
                low: String::new(),
                place: Place::Prose,
                example: false,
                unit: 0,
            });
            sink.hit(
                "hidden.html_comment",
                Fail,
                &Line { no: *first, ..at },
                "text hidden in an HTML comment or a hidden element speaks to the agent or carries a flagged command",
            );
        }
    }
    if let Some((first, run, lines)) = &doc.after_blank {
        let nos: Vec<usize> = lines.iter().map(|l| l.no).collect();
        let flagged = sink.out.flagged_at(sink.file, &nos);
        let instruction_like = lines.iter().any(|l| instructions::addresses_agent(&l.low));
        if let Some(l) = lines.first() {
            let severity = if flagged || instruction_like {
                Fail
            } else {
                Warn
            };
            sink.hit(
                "hidden.after_blank_run",
                severity,
                &Line {
                    no: *first,
                    ..l.clone()
                },
                format!("text after {run} blank lines, out of a reader's sight"),
            );
        }
    }
    for l in &doc.after_space {
        let flagged = sink.out.flagged_at(sink.file, &[l.no]);
        let severity = if flagged || instructions::addresses_agent(&l.low) {
            Fail
        } else {
            Warn
        };
        sink.hit(
            "hidden.after_blank_run",
            severity,
            l,
            format!(
                "text after a run of at least {} spaces, out of a reader's sight",
                super::lines::SPACE_RUN
            ),
        );
    }
}
