//! One file scanned: its characters, then its lines, through every rule that reads them.

use super::lines::{
    Kind, Line, Place, Sink, kind_of, markup_lines, plain_lines, prose_blocks, script_lines,
};
use super::{Findings, hidden, instructions, packages, scripts};

/// Scans one file into `out`.
pub(crate) fn scan_file(path: &str, bytes: &[u8], out: &mut Findings) {
    let bytes = &bytes[..bytes.len().min(super::MAX_FILE_BYTES)];
    if bytes.iter().take(8192).any(|b| *b == 0) {
        return; // binary
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        // A cut inside a character at the size cap: read up to it.
        Err(e) if e.error_len().is_none() => {
            std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default()
        }
        Err(_) => return,
    };
    let Some(kind) = kind_of(path, text) else {
        return;
    };
    let mut sink = Sink {
        out,
        file: path,
        hits: 0,
    };
    hidden::scan_chars(text, &mut sink);
    let doc = match kind {
        Kind::Markup => markup_lines(text),
        Kind::Text => plain_lines(text, Place::Prose),
        Kind::Data => plain_lines(text, Place::Code),
        Kind::Script(c) => script_lines(text, c),
    };
    let lines = &doc.lines;
    for l in lines {
        instructions::line_rules(l, &mut sink);
    }
    let code_rules = |l: &&Line<'_>| l.place != Place::Comment;
    let code: Vec<&Line<'_>> = lines.iter().filter(code_rules).collect();
    scripts::scan_lines(&code, kind, &mut sink);
    packages::scan_manifest_file(path, text, &mut sink);
    instructions::detector_rules(&prose_blocks(lines), &mut sink);
    hidden::scan_regions(&doc, &mut sink);
}
