//! Authority and freshness.

use chrono::{DateTime, Duration, Utc};
use registry_core::Trust;
use serde::{Deserialize, Serialize};

/// How authoritative a source is; on disagreement the higher one ranks first.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Authority {
    Informal = 0,
    #[default]
    Reference = 1,
    SystemOfRecord = 2,
    Policy = 3,
}

impl Authority {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            Authority::Informal,
            Authority::Reference,
            Authority::SystemOfRecord,
            Authority::Policy,
        ]
        .into_iter()
        .find(|a| a.as_str() == s)
    }

    pub fn level(self) -> u8 {
        self as u8
    }

    /// Multiplier on the fused score: +10% per level above `informal`. Multiplicative, so it
    /// means the same under RRF and convex fusion, and large enough to reorder two sources that
    /// match a query about equally (as two disagreeing versions of a rule do).
    pub fn boost(self) -> f32 {
        1.0 + 0.1 * f32::from(self.level())
    }

    /// The governance trust an authority earns, at most (a document carries the lower of this
    /// and what the filing key grants).
    pub fn trust(self) -> Trust {
        match self {
            Authority::Policy | Authority::SystemOfRecord => Trust::AuthoritativeSystem,
            Authority::Reference => Trust::VerifiedFact,
            Authority::Informal => Trust::UserStatement,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Freshness {
    Fresh,
    Stale,
    Expired,
    /// `effective_at` lies after the time asked about.
    NotYetEffective,
}

/// Freshness at `as_of`: expired at or after `expires_at`; not yet effective before
/// `effective_at`; stale once `stale_after` has passed since `effective_at`; else fresh.
pub fn freshness(
    effective_at: DateTime<Utc>,
    expires_at: Option<DateTime<Utc>>,
    stale_after: Duration,
    as_of: DateTime<Utc>,
) -> Freshness {
    if expires_at.is_some_and(|e| e <= as_of) {
        Freshness::Expired
    } else if effective_at > as_of {
        Freshness::NotYetEffective
    } else if as_of - effective_at > stale_after {
        Freshness::Stale
    } else {
        Freshness::Fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freshness_follows_effective_expiry_and_horizon() {
        let t0: DateTime<Utc> = "2024-01-01T00:00:00Z".parse().unwrap();
        let year = Duration::days(365);
        let exp = Some(t0 + Duration::days(500));
        assert_eq!(freshness(t0, exp, year, t0), Freshness::Fresh);
        assert_eq!(
            freshness(t0, exp, year, t0 - Duration::seconds(1)),
            Freshness::NotYetEffective
        );
        assert_eq!(
            freshness(t0, exp, year, t0 + Duration::days(400)),
            Freshness::Stale
        );
        assert_eq!(
            freshness(t0, exp, year, t0 + Duration::days(500)),
            Freshness::Expired
        );
        assert_eq!(
            freshness(t0, None, year, t0 + Duration::days(9000)),
            Freshness::Stale
        );
    }

    #[test]
    fn authority_orders_and_boosts() {
        assert!(Authority::Policy > Authority::SystemOfRecord);
        assert!(Authority::SystemOfRecord > Authority::Reference);
        assert!(Authority::Reference > Authority::Informal);
        assert!(Authority::Policy.boost() > Authority::Reference.boost());
        assert_eq!(
            Authority::parse("system_of_record"),
            Some(Authority::SystemOfRecord)
        );
    }
}
