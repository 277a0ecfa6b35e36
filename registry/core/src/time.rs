//! The one timestamp codec for times kept as text: RFC 3339 in UTC with microseconds and a
//! `Z` (`2026-12-05T09:30:00.123456Z`). The embedded store keeps its times in this form and
//! the audit chain hashes it, so a time reads back as the instant that was written and a
//! verifier recomputes the same bytes.

use chrono::{DateTime, SecondsFormat, Utc};

/// `t` as stored text.
pub fn to_text(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// A stored text back as a time (any RFC 3339 offset is read and moved to UTC).
pub fn from_text(s: &str) -> Result<DateTime<Utc>, chrono::ParseError> {
    DateTime::parse_from_rfc3339(s).map(|d| d.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_reads_back_as_written_to_the_microsecond() {
        let t = DateTime::from_timestamp_micros(1_764_927_000_123_456).unwrap();
        let s = to_text(&t);
        assert_eq!(s, "2025-12-05T09:30:00.123456Z");
        assert_eq!(from_text(&s).unwrap(), t);
        assert_eq!(
            from_text("2025-12-05T10:30:00.123456+01:00").unwrap(),
            t,
            "an offset is moved to UTC"
        );
        assert!(from_text("yesterday").is_err());
    }
}
