//! Replay: a stored pack's request compiled again against the registry as it is now, by the
//! same principal rules, and the difference item by item (added, removed, changed version or
//! hash, each with its reasons).
//!
//! A replay stores nothing and counts nothing as used: no model sees it. It is compiled for the
//! caller as it is now, so it never names an asset the caller cannot read now; an item of the
//! old pack that the caller can no longer read is reported by what the old manifest already
//! said (its id, version and hashes) with a reason that does not tell deleted from hidden.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use registry_core::ErrorCode;
use registry_core::access::{self, Action};
use registry_core::principal::Principal;
use serde::{Deserialize, Serialize};

use crate::ContextService;
use crate::compile::{LayerName, Manifest, ManifestItem, PackRequest, build, load};
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// In the pack now, not then.
    Added,
    /// In the pack then, not now.
    Removed,
    /// In both, at another version or with other content.
    Changed,
}

/// An item as one of the two packs holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplayItem {
    pub position: usize,
    pub layer: LayerName,
    pub source_id: Option<String>,
    pub version: Option<String>,
    /// sha256 of the item as the pack holds it.
    pub content_hash: String,
    /// sha256 of the stored asset's content.
    pub asset_content_hash: Option<String>,
}

impl ReplayItem {
    pub fn of(i: &ManifestItem) -> ReplayItem {
        ReplayItem {
            position: i.position,
            layer: i.layer,
            source_id: i.source_id.clone(),
            version: i.version.clone(),
            content_hash: i.content_hash.clone(),
            asset_content_hash: i.asset_content_hash.clone(),
        }
    }
}

/// One difference between the stored pack and its replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplayChange {
    pub change: ChangeKind,
    /// `memory`, `knowledge_chunk` or `skill`.
    pub source_type: String,
    /// The item in the stored pack (absent when added).
    pub before: Option<ReplayItem>,
    /// The item in the replay (absent when removed).
    pub after: Option<ReplayItem>,
    /// Why, in fixed words: `version 1 -> 2`, `content changed`, `omitted now: over_budget`, …
    pub reasons: Vec<String>,
}

/// `POST /v1/context/{id}/replay`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Replay {
    /// The stored pack.
    pub manifest_id: String,
    pub compiled_at: DateTime<Utc>,
    pub replayed_at: DateTime<Utc>,
    pub used_tokens_before: usize,
    pub used_tokens_after: usize,
    pub changes: Vec<ReplayChange>,
    /// Items in both packs at the same version and content (the fixed zone included).
    pub unchanged: usize,
}

/// How a stored pack's items are matched with the replay's: a memory by id, a skill by name
/// (so a new release is a changed version), a chunk by id (a changed document's chunks are
/// paired afterwards, see [`pair_by_parent`]).
fn key_of(i: &ManifestItem) -> (String, String) {
    let id = i.source_id.clone().unwrap_or_default();
    let id = match i.source_type.as_str() {
        "skill" => id.split('@').next().unwrap_or_default().to_string(),
        _ => id,
    };
    (i.source_type.clone(), id)
}

/// Replays stored manifest `id` for `p` (see the module doc). A manifest stored before
/// requests were kept answers 409 `REPLAY_UNAVAILABLE`.
pub fn replay(state: &ContextService, p: &Principal, id: &str) -> Result<Replay> {
    let before = load(state, p, id)?;
    let stored = state
        .manifests
        .get_manifest(id)?
        .ok_or_else(|| Error::not_found(format!("no context pack {id}")))?;
    let Some(request) = stored.request else {
        return Err(Error::new(
            ErrorCode::ReplayUnavailable,
            format!(
                "context pack {id} was stored before requests were kept with manifests; it \
                 cannot be replayed"
            ),
        )
        .with_details(serde_json::json!({ "manifest_id": id, "reason": registry_core::FieldReason::NoStoredRequest })));
    };
    let mut req: PackRequest = serde_json::from_value(request).map_err(Error::internal)?;
    // As it is now: validity and freshness are judged at the time of the replay.
    req.as_of = None;
    let (pack, _) = build(state, p, &req)?;
    let after = pack.manifest;
    let (changes, unchanged) = diff(state, p, &before, &after)?;
    Ok(Replay {
        manifest_id: before.id.clone(),
        compiled_at: before.created_at,
        replayed_at: after.created_at,
        used_tokens_before: before.used_tokens,
        used_tokens_after: after.used_tokens,
        changes,
        unchanged,
    })
}

/// Pairs the items of both packs and lists what differs.
fn diff(
    state: &ContextService,
    p: &Principal,
    before: &Manifest,
    after: &Manifest,
) -> Result<(Vec<ReplayChange>, usize)> {
    let retrieved = |m: &Manifest| -> BTreeMap<(String, String), ManifestItem> {
        m.items
            .iter()
            .filter(|i| i.layer != LayerName::Fixed)
            .map(|i| (key_of(i), i.clone()))
            .collect()
    };
    let fixed = before
        .items
        .iter()
        .filter(|i| i.layer == LayerName::Fixed)
        .count();
    let mut old = retrieved(before);
    let mut new = retrieved(after);
    let mut changes = vec![];
    let mut unchanged = fixed;
    let keys: Vec<_> = old
        .keys()
        .filter(|k| new.contains_key(*k))
        .cloned()
        .collect();
    for k in keys {
        let (a, b) = (old.remove(&k).unwrap(), new.remove(&k).unwrap());
        match changed(&a, &b) {
            reasons if reasons.is_empty() => unchanged += 1,
            reasons => changes.push(change(
                ChangeKind::Changed,
                &a.source_type,
                Some(&a),
                Some(&b),
                reasons,
            )),
        }
    }
    for (a, b) in pair_by_parent(&mut old, &mut new) {
        let mut reasons = vec![format!(
            "{} is now at another version",
            a.parent_id.as_deref().unwrap_or("the document")
        )];
        reasons.extend(changed(&a, &b));
        changes.push(change(
            ChangeKind::Changed,
            &a.source_type,
            Some(&a),
            Some(&b),
            reasons,
        ));
    }
    for a in old.into_values() {
        let reasons = vec![why_removed(state, p, after, &a)?];
        changes.push(change(
            ChangeKind::Removed,
            &a.source_type,
            Some(&a),
            None,
            reasons,
        ));
    }
    for b in new.into_values() {
        let reason = match before.omitted.iter().find(|o| o.source_id == b.source_id) {
            Some(o) => format!(
                "omitted then: {}",
                serde_json::to_value(o.reason)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            ),
            None => "not a candidate then (new, changed or newly visible)".to_string(),
        };
        changes.push(change(
            ChangeKind::Added,
            &b.source_type,
            None,
            Some(&b),
            vec![reason],
        ));
    }
    changes.sort_by_key(|c| {
        (
            c.before.as_ref().or(c.after.as_ref()).map(|i| i.position),
            c.change as u8,
        )
    });
    Ok((changes, unchanged))
}

fn change(
    kind: ChangeKind,
    source_type: &str,
    a: Option<&ManifestItem>,
    b: Option<&ManifestItem>,
    reasons: Vec<String>,
) -> ReplayChange {
    ReplayChange {
        change: kind,
        source_type: source_type.to_string(),
        before: a.map(ReplayItem::of),
        after: b.map(ReplayItem::of),
        reasons,
    }
}

/// What differs between two images of one item; empty when nothing does.
fn changed(a: &ManifestItem, b: &ManifestItem) -> Vec<String> {
    let mut reasons = vec![];
    if a.source_id != b.source_id && a.source_type == "skill" {
        reasons.push(format!(
            "release {} -> {}",
            a.source_id.as_deref().unwrap_or("?"),
            b.source_id.as_deref().unwrap_or("?")
        ));
    } else if a.version != b.version {
        reasons.push(format!(
            "version {} -> {}",
            a.version.as_deref().unwrap_or("?"),
            b.version.as_deref().unwrap_or("?")
        ));
    }
    if a.asset_content_hash != b.asset_content_hash {
        reasons.push("content changed".into());
    } else if a.content_hash != b.content_hash {
        reasons.push(format!("shown as {:?} now", b.transform).to_lowercase());
    }
    reasons
}

/// The chunks of a document that changed have new ids: a removed chunk and an added one of the
/// same document are one changed item, paired in the order the packs held them.
fn pair_by_parent(
    old: &mut BTreeMap<(String, String), ManifestItem>,
    new: &mut BTreeMap<(String, String), ManifestItem>,
) -> Vec<(ManifestItem, ManifestItem)> {
    let mut pairs = vec![];
    let mut olds: Vec<_> = old
        .values()
        .filter(|i| i.parent_id.is_some())
        .cloned()
        .collect();
    olds.sort_by_key(|i| i.position);
    for a in olds {
        let candidate = new
            .values()
            .filter(|b| b.parent_id == a.parent_id && b.source_type == a.source_type)
            .min_by_key(|b| b.position)
            .cloned();
        if let Some(b) = candidate {
            old.remove(&key_of(&a));
            new.remove(&key_of(&b));
            pairs.push((a, b));
        }
    }
    pairs
}

/// Why an item of the stored pack is not in the replay, told only as far as the caller may
/// read the asset now.
fn why_removed(
    state: &ContextService,
    p: &Principal,
    after: &Manifest,
    a: &ManifestItem,
) -> Result<String> {
    if let Some(o) = after.omitted.iter().find(|o| o.source_id == a.source_id) {
        let reason = serde_json::to_value(o.reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        return Ok(format!("omitted now: {reason}"));
    }
    let id = match a.source_type.as_str() {
        "memory" | "knowledge_chunk" => a.source_id.clone(),
        _ => None,
    };
    if let Some(id) = id
        && let Some(rec) = state.store.get(&id)?
        && access::may(p, Action::Read, &rec.meta)
        && !rec.meta.status.is_servable()
    {
        return Ok(format!("{} now", rec.meta.status.as_str()));
    }
    Ok("not a candidate now (changed, deleted, no longer visible or outranked)".into())
}
