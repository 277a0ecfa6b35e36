//! Time expressions in a search query, resolved to a window of dates: "on 7 July, 2023",
//! "in May 2023", "the week before August 3, 2023", "2023年5月", "last month" (the last against
//! the search's `as_of`). Memories whose event date falls in (or just after) the window match
//! the query in time; a conversation turn is dated by its session.
//!
//! Deterministic and small on purpose: it recognises absolute dates (day, month, year) in
//! English and Chinese, a span "before"/"after" an absolute date, and a few relative phrases;
//! anything else resolves to nothing and leaves the ranking as it was.

use std::sync::LazyLock;

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};
use regex::Regex;

/// A half-open interval of time the query is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWindow {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// How long after an event it is typically told: a turn dated by its session mentions what
/// happened in the days before.
const MENTION_LAG_DAYS: i64 = 10;
/// Beyond the window (and its lag), closeness halves every this many days.
const HALF_LIFE_DAYS: f32 = 15.0;

impl TimeWindow {
    fn day(d: NaiveDate) -> TimeWindow {
        let start = Utc.from_utc_datetime(&d.and_hms_opt(0, 0, 0).expect("midnight"));
        TimeWindow {
            start,
            end: start + Duration::days(1),
        }
    }

    fn month(y: i32, m: u32) -> Option<TimeWindow> {
        let first = NaiveDate::from_ymd_opt(y, m, 1)?;
        let next = if m == 12 {
            NaiveDate::from_ymd_opt(y + 1, 1, 1)?
        } else {
            NaiveDate::from_ymd_opt(y, m + 1, 1)?
        };
        Some(TimeWindow {
            start: TimeWindow::day(first).start,
            end: TimeWindow::day(next).start,
        })
    }

    fn year(y: i32) -> Option<TimeWindow> {
        Some(TimeWindow {
            start: TimeWindow::day(NaiveDate::from_ymd_opt(y, 1, 1)?).start,
            end: TimeWindow::day(NaiveDate::from_ymd_opt(y + 1, 1, 1)?).start,
        })
    }

    /// 1 when `when` is inside the window or up to [`MENTION_LAG_DAYS`] after it (a day's
    /// slack before it), then halving every [`HALF_LIFE_DAYS`] of distance.
    pub fn closeness(&self, when: DateTime<Utc>) -> f32 {
        let lo = self.start - Duration::days(1);
        let hi = self.end + Duration::days(MENTION_LAG_DAYS);
        let off = if when < lo {
            lo - when
        } else if when > hi {
            when - hi
        } else {
            return 1.0;
        };
        let days = off.num_seconds() as f32 / 86400.0;
        0.5f32.powf(days / HALF_LIFE_DAYS)
    }
}

const MONTHS: &str = "january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec";

fn month_number(name: &str) -> Option<u32> {
    let n = name.to_ascii_lowercase();
    let all = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    all.iter()
        .position(|m| n.starts_with(m))
        .map(|i| i as u32 + 1)
}

static DAY_MONTH_YEAR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?i)\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({MONTHS})\.?,?\s+(\d{{4}})\b"
    ))
    .expect("regex")
});
static MONTH_DAY_YEAR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?i)\b({MONTHS})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b"
    ))
    .expect("regex")
});
static MONTH_YEAR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"(?i)\b({MONTHS})\.?,?\s+(?:of\s+)?(\d{{4}})\b")).expect("regex")
});
static YEAR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b((?:19|20)\d{2})\b").expect("regex"));
static CJK_DATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(\d{4})\s*年(?:\s*(\d{1,2})\s*月(?:\s*(\d{1,2})\s*[日号])?)?").expect("regex")
});
/// A span before or after the date that follows it: "the week before", "two days after".
static SPAN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:(a|one|two|three|four|few|couple of|\d+)\s+)?(day|days|night|weekend|week|weeks|month|months)\s+(before|after|prior to)\s*$",
    )
    .expect("regex")
});
static RELATIVE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(yesterday|last night|last weekend|last week|last month|last year|this year|recently|昨天|上周|上个月|去年|今年|最近)",
    )
    .expect("regex")
});

fn count(word: Option<&str>) -> i64 {
    match word.map(str::to_ascii_lowercase).as_deref() {
        None | Some("a") | Some("one") => 1,
        Some("two") | Some("couple of") => 2,
        Some("three") | Some("few") => 3,
        Some("four") => 4,
        Some(n) => n.parse().unwrap_or(1).clamp(1, 366),
    }
}

/// The absolute date expressions in `q`, each with the byte where it starts.
fn absolute(q: &str) -> Vec<(usize, TimeWindow)> {
    let mut out: Vec<(usize, usize, TimeWindow)> = vec![];
    let free = |out: &Vec<(usize, usize, TimeWindow)>, s: usize, e: usize| {
        out.iter().all(|&(a, b, _)| e <= a || s >= b)
    };
    for c in DAY_MONTH_YEAR.captures_iter(q) {
        let m = c.get(0).expect("match");
        let (Some(d), Some(mo), Some(y)) =
            (c[1].parse().ok(), month_number(&c[2]), c[3].parse().ok())
        else {
            continue;
        };
        if let Some(date) = NaiveDate::from_ymd_opt(y, mo, d) {
            out.push((m.start(), m.end(), TimeWindow::day(date)));
        }
    }
    for c in MONTH_DAY_YEAR.captures_iter(q) {
        let m = c.get(0).expect("match");
        let (Some(mo), Some(d), Some(y)) =
            (month_number(&c[1]), c[2].parse().ok(), c[3].parse().ok())
        else {
            continue;
        };
        if let Some(date) = NaiveDate::from_ymd_opt(y, mo, d)
            && free(&out, m.start(), m.end())
        {
            out.push((m.start(), m.end(), TimeWindow::day(date)));
        }
    }
    for c in MONTH_YEAR.captures_iter(q) {
        let m = c.get(0).expect("match");
        if let (Some(mo), Some(y)) = (month_number(&c[1]), c[2].parse().ok())
            && free(&out, m.start(), m.end())
            && let Some(w) = TimeWindow::month(y, mo)
        {
            out.push((m.start(), m.end(), w));
        }
    }
    for c in CJK_DATE.captures_iter(q) {
        let m = c.get(0).expect("match");
        let Ok(y) = c[1].parse::<i32>() else { continue };
        let mo = c.get(2).and_then(|x| x.as_str().parse::<u32>().ok());
        let d = c.get(3).and_then(|x| x.as_str().parse::<u32>().ok());
        let w = match (mo, d) {
            (Some(mo), Some(d)) => NaiveDate::from_ymd_opt(y, mo, d).map(TimeWindow::day),
            (Some(mo), None) => TimeWindow::month(y, mo),
            _ => TimeWindow::year(y),
        };
        if let Some(w) = w
            && free(&out, m.start(), m.end())
        {
            out.push((m.start(), m.end(), w));
        }
    }
    for c in YEAR.captures_iter(q) {
        let m = c.get(0).expect("match");
        if let Ok(y) = c[1].parse()
            && free(&out, m.start(), m.end())
            && let Some(w) = TimeWindow::year(y)
        {
            out.push((m.start(), m.end(), w));
        }
    }
    out.sort_by_key(|&(s, _, _)| s);
    out.into_iter().map(|(s, _, w)| (s, w)).collect()
}

/// The window `query` is about, if it names one; relative phrases count back from `as_of`.
/// Several expressions: the first one wins.
pub fn resolve(query: &str, as_of: DateTime<Utc>) -> Option<TimeWindow> {
    if let Some(&(start, w)) = absolute(query).first() {
        let before = &query[..start];
        let before = before.trim_end().trim_end_matches(',');
        let before = before
            .strip_suffix("on")
            .or_else(|| before.strip_suffix("of"))
            .unwrap_or(before)
            .trim_end();
        if let Some(c) = SPAN.captures(before) {
            let n = count(c.get(1).map(|m| m.as_str()));
            let unit = match c[2].to_ascii_lowercase().as_str() {
                "day" | "days" | "night" => 1,
                "weekend" | "week" | "weeks" => 7,
                _ => 31,
            };
            let span = Duration::days(n * unit);
            return Some(if c[3].eq_ignore_ascii_case("after") {
                TimeWindow {
                    start: w.end,
                    end: w.end + span,
                }
            } else {
                TimeWindow {
                    start: w.start - span,
                    end: w.start,
                }
            });
        }
        return Some(w);
    }
    let c = RELATIVE.captures(query)?;
    let day = |n: i64| as_of - Duration::days(n);
    let w = match c[1].to_ascii_lowercase().as_str() {
        "yesterday" | "last night" | "昨天" => TimeWindow {
            start: day(2),
            end: as_of,
        },
        "last weekend" | "last week" | "上周" => TimeWindow {
            start: day(14),
            end: as_of,
        },
        "last month" | "上个月" => TimeWindow {
            start: day(62),
            end: as_of,
        },
        "last year" | "去年" => TimeWindow::year(as_of.year() - 1)?,
        "this year" | "今年" => TimeWindow::year(as_of.year())?,
        _ => TimeWindow {
            start: day(30),
            end: as_of,
        },
    };
    Some(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(y: i32, m: u32, d: u32) -> DateTime<Utc> {
        TimeWindow::day(NaiveDate::from_ymd_opt(y, m, d).unwrap()).start
    }

    #[test]
    fn absolute_dates_resolve_to_their_day_month_or_year() {
        let now = at(2026, 1, 1);
        let w = resolve("What happened to John on 7 July, 2023?", now).unwrap();
        assert_eq!((w.start, w.end), (at(2023, 7, 7), at(2023, 7, 8)));
        let w = resolve("Who did Maria have dinner with on May 3, 2023?", now).unwrap();
        assert_eq!(w.start, at(2023, 5, 3));
        let w = resolve("What did John attend in March 2023?", now).unwrap();
        assert_eq!((w.start, w.end), (at(2023, 3, 1), at(2023, 4, 1)));
        let w = resolve("What did she paint in 2022", now).unwrap();
        assert_eq!((w.start, w.end), (at(2022, 1, 1), at(2023, 1, 1)));
        let w = resolve("2023年5月3日我们讨论了什么", now).unwrap();
        assert_eq!(w.start, at(2023, 5, 3));
        let w = resolve("2023年12月的周报", now).unwrap();
        assert_eq!((w.start, w.end), (at(2023, 12, 1), at(2024, 1, 1)));
    }

    #[test]
    fn a_span_before_or_after_a_date_moves_the_window() {
        let now = at(2026, 1, 1);
        let w = resolve("What did John do the week before August 3, 2023?", now).unwrap();
        assert_eq!((w.start, w.end), (at(2023, 7, 27), at(2023, 8, 3)));
        let w = resolve("the puppy she got two weeks before August 11, 2023", now).unwrap();
        assert_eq!((w.start, w.end), (at(2023, 7, 28), at(2023, 8, 11)));
        let w = resolve("What did they do the day after 3 June, 2023?", now).unwrap();
        assert_eq!((w.start, w.end), (at(2023, 6, 4), at(2023, 6, 5)));
    }

    #[test]
    fn relative_phrases_count_back_from_as_of_and_plain_text_names_no_time() {
        let now = at(2023, 6, 10);
        let w = resolve("what did I buy last month", now).unwrap();
        assert_eq!(w.end, now);
        assert!(resolve("What is Caroline's identity?", now).is_none());
        assert!(resolve("How many pets does she have? 3 dogs", now).is_none());
    }

    #[test]
    fn closeness_is_one_inside_the_window_and_its_lag_then_falls() {
        let w = TimeWindow::month(2023, 5).unwrap();
        assert_eq!(w.closeness(at(2023, 5, 20)), 1.0);
        assert_eq!(w.closeness(at(2023, 6, 8)), 1.0);
        let far = w.closeness(at(2023, 9, 1));
        assert!(far > 0.0 && far < 0.2, "{far}");
        assert!(w.closeness(at(2023, 6, 20)) > far);
    }
}
