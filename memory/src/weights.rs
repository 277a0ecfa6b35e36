//! The ranking mix of memory search: every signal a hit is scored on, and the weight each
//! carries. Search scores with it; the service holds the weights in force.

use serde::{Deserialize, Serialize};

/// Every signal in [0, 1], and the weight it carries in `score`. `exact` is outside the
/// weighted mix: a hit holding every rare identifier of the query ranks before every hit that
/// does not, whatever the rest says.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Breakdown {
    pub exact: f32,
    pub semantic: f32,
    pub lexical: f32,
    pub entity: f32,
    pub recency: f32,
    /// How close the record's event date is to the time the query names ("in May 2023",
    /// "the week before 3 August"); 0 for every hit when the query names no time.
    pub temporal: f32,
    /// 1 when the query names the record's speaker ("What did Melanie paint?"): a question
    /// about a person is answered by what that person said, not by turns that address them.
    pub speaker: f32,
    /// For the turn that answers a question among the strongest hits (the next turn of the
    /// same session): that question's score relative to the best hit's. A reply often shares
    /// few words with the query that its question matched ("5 years already!").
    pub context: f32,
    pub valid_time: f32,
    pub scope_distance: f32,
    pub trust: f32,
    pub feedback: f32,
}

pub const WEIGHTS: Breakdown = Breakdown {
    exact: 0.0,
    semantic: 0.40,
    lexical: 0.15,
    entity: 0.05,
    recency: 0.10,
    temporal: 0.25,
    speaker: 0.05,
    context: 0.10,
    valid_time: 0.05,
    scope_distance: 0.05,
    trust: 0.05,
    feedback: 0.10,
};

impl Breakdown {
    /// The weighted mix, with `exact` outside it.
    pub fn total(&self, w: &Breakdown) -> f32 {
        self.semantic * w.semantic
            + self.lexical * w.lexical
            + self.entity * w.entity
            + self.recency * w.recency
            + self.temporal * w.temporal
            + self.speaker * w.speaker
            + self.context * w.context
            + self.valid_time * w.valid_time
            + self.scope_distance * w.scope_distance
            + self.trust * w.trust
            + self.feedback * w.feedback
            + self.exact
    }
}
