//! A bounded YAML reader for front matter. It owns the one place where untrusted YAML becomes
//! data: `saphyr-parser` events are folded into a small [`Node`] tree, anchors and aliases are
//! refused outright (so nothing is ever expanded and the tree is never larger than its text),
//! and depth and node count stop at fixed limits. The caller caps the text's size first.
//!
//! Scalars are resolved as `serde_yaml` 0.9 resolved them (the YAML 1.2 core schema: `~`,
//! `null`, `true`, `0x1F`, `0o17`, `1.5`, `.inf`, …; a leading zero makes a string), so that
//! replacing that crate changed no verdict and no value.

use std::borrow::Cow;
use std::collections::HashSet;

use saphyr_parser::{Event, Parser, ScalarStyle, Tag};

/// Deepest nesting of sequences and mappings in a front matter; the format needs 2.
pub const MAX_FRONTMATTER_DEPTH: usize = 32;
/// Most YAML nodes (scalars, sequences and mappings, keys included) in a front matter.
pub const MAX_FRONTMATTER_NODES: usize = 10_000;

/// Why a YAML text was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum YamlError {
    Syntax(String),
    /// An anchor (`&a`) or an alias (`*a`): refused before anything refers to anything.
    AnchorOrAlias,
    TooDeep,
    TooManyNodes,
}

/// One YAML node, after scalar resolution.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Null,
    Bool(bool),
    /// A non-negative integer that fits `u64`.
    UInt(u64),
    /// A negative integer that fits `i64`.
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
    /// A node under a tag outside the core schema (`!thing value`), kept as `serde_yaml` kept
    /// it: a scalar reads as its value, a collection is not a plain collection.
    Tagged(String, Box<Node>),
}

impl Node {
    /// The node as a string when it is a scalar, as the validator reads every scalar (numbers
    /// and booleans in their YAML spelling, null as the empty string); `None` for collections.
    pub(crate) fn scalar_string(&self) -> Option<String> {
        Some(match self {
            Node::Null => String::new(),
            Node::Bool(b) => b.to_string(),
            Node::UInt(n) => n.to_string(),
            Node::Int(n) => n.to_string(),
            Node::Float(f) => float_string(*f),
            Node::Str(s) => s.clone(),
            Node::Tagged(_, inner) => return inner.scalar_string(),
            Node::Seq(_) | Node::Map(_) => return None,
        })
    }

    /// The node as JSON: numbers stay numbers, a non-finite float becomes `null` (JSON has
    /// none), mapping keys are their scalar strings. `None` when a key is not a scalar.
    pub(crate) fn to_json(&self) -> Option<serde_json::Value> {
        use serde_json::Value;
        Some(match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::UInt(n) => Value::from(*n),
            Node::Int(n) => Value::from(*n),
            Node::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Node::Str(s) => Value::String(s.clone()),
            Node::Seq(items) => Value::Array(
                items
                    .iter()
                    .map(Node::to_json)
                    .collect::<Option<Vec<_>>>()?,
            ),
            Node::Map(entries) => {
                let mut map = serde_json::Map::new();
                for (k, v) in entries {
                    map.insert(k.scalar_string()?, v.to_json()?);
                }
                Value::Object(map)
            }
            Node::Tagged(tag, inner) => {
                let mut map = serde_json::Map::new();
                map.insert(tag.clone(), inner.to_json()?);
                Value::Object(map)
            }
        })
    }

    /// A string equal for two keys exactly when the keys are equal, for duplicate detection.
    fn key_identity(&self) -> String {
        match self {
            Node::Null => "~".into(),
            Node::Bool(b) => format!("b:{b}"),
            Node::UInt(n) => format!("n:{n}"),
            Node::Int(n) => format!("n:{n}"),
            Node::Float(f) => format!("f:{f:?}"),
            Node::Str(s) => format!("s:{s}"),
            Node::Seq(items) => {
                let inner: Vec<_> = items.iter().map(Node::key_identity).collect();
                format!("[{}]", inner.join(","))
            }
            Node::Map(entries) => {
                let inner: Vec<_> = entries
                    .iter()
                    .map(|(k, v)| format!("{}:{}", k.key_identity(), v.key_identity()))
                    .collect();
                format!("{{{}}}", inner.join(","))
            }
            Node::Tagged(tag, inner) => format!("{tag}({})", inner.key_identity()),
        }
    }
}

/// A float as `serde_yaml` printed it: `ryu`'s shortest round-trip form (`1e16`, `1000.0`),
/// `.nan`, `.inf`, `-.inf`.
fn float_string(f: f64) -> String {
    if f.is_nan() {
        ".nan".into()
    } else if f.is_infinite() {
        if f.is_sign_negative() {
            "-.inf"
        } else {
            ".inf"
        }
        .into()
    } else {
        ryu::Buffer::new().format_finite(f).to_owned()
    }
}

enum Frame {
    Seq {
        items: Vec<Node>,
        tag: Option<String>,
    },
    Map {
        entries: Vec<(Node, Node)>,
        key: Option<Node>,
        seen: HashSet<String>,
        tag: Option<String>,
    },
}

/// The tag of a collection or scalar when it is outside the core schema.
fn foreign_tag(tag: Option<&Tag>) -> Option<String> {
    tag.filter(|t| !t.is_yaml_core_schema())
        .map(ToString::to_string)
}

fn tagged(tag: Option<String>, node: Node) -> Node {
    match tag {
        Some(t) => Node::Tagged(t, Box::new(node)),
        None => node,
    }
}

/// Reads one YAML document; an empty text (or only comments) is [`Node::Null`].
pub(crate) fn parse(text: &str) -> Result<Node, YamlError> {
    let mut stack: Vec<Frame> = Vec::new();
    let mut root = None;
    let mut documents = 0usize;
    let mut nodes = 0usize;
    for event in Parser::new_from_str(text) {
        let (event, _span) = event.map_err(|e| YamlError::Syntax(e.to_string()))?;
        let node = match event {
            Event::StreamStart | Event::DocumentEnd | Event::Nothing => continue,
            Event::StreamEnd => break,
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(YamlError::Syntax(
                        "more than one YAML document in the front matter".into(),
                    ));
                }
                continue;
            }
            Event::Alias(_) => return Err(YamlError::AnchorOrAlias),
            Event::Scalar(_, _, anchor, _)
            | Event::SequenceStart(anchor, _)
            | Event::MappingStart(anchor, _)
                if anchor != 0 =>
            {
                return Err(YamlError::AnchorOrAlias);
            }
            Event::SequenceStart(_, tag) => {
                count_node(&mut nodes)?;
                if stack.len() >= MAX_FRONTMATTER_DEPTH {
                    return Err(YamlError::TooDeep);
                }
                stack.push(Frame::Seq {
                    items: Vec::new(),
                    tag: foreign_tag(tag.as_deref()),
                });
                continue;
            }
            Event::MappingStart(_, tag) => {
                count_node(&mut nodes)?;
                if stack.len() >= MAX_FRONTMATTER_DEPTH {
                    return Err(YamlError::TooDeep);
                }
                stack.push(Frame::Map {
                    entries: Vec::new(),
                    key: None,
                    seen: HashSet::new(),
                    tag: foreign_tag(tag.as_deref()),
                });
                continue;
            }
            Event::Scalar(value, style, _, tag) => {
                count_node(&mut nodes)?;
                let node = resolve_scalar(value, style, tag.as_deref())?;
                tagged(foreign_tag(tag.as_deref()), node)
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(Frame::Seq { items, tag }) => tagged(tag, Node::Seq(items)),
                Some(Frame::Map { entries, tag, .. }) => tagged(tag, Node::Map(entries)),
                None => return Err(YamlError::Syntax("unbalanced collection end".into())),
            },
        };
        match stack.last_mut() {
            None => root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map {
                entries, key, seen, ..
            }) => match key.take() {
                None => *key = Some(node),
                Some(k) => {
                    if !seen.insert(k.key_identity()) {
                        let shown = k.scalar_string().unwrap_or_else(|| "(complex key)".into());
                        return Err(YamlError::Syntax(format!(
                            "duplicate mapping key {shown:?}"
                        )));
                    }
                    entries.push((k, node));
                }
            },
        }
    }
    Ok(root.unwrap_or(Node::Null))
}

fn count_node(nodes: &mut usize) -> Result<(), YamlError> {
    *nodes += 1;
    if *nodes > MAX_FRONTMATTER_NODES {
        return Err(YamlError::TooManyNodes);
    }
    Ok(())
}

fn resolve_scalar(
    value: Cow<'_, str>,
    style: ScalarStyle,
    tag: Option<&Tag>,
) -> Result<Node, YamlError> {
    let core = tag
        .filter(|t| t.is_yaml_core_schema())
        .map(|t| t.suffix.as_str());
    let invalid = |what: &str| YamlError::Syntax(format!("{value:?} is not a valid {what}"));
    match core {
        Some("str") => Ok(Node::Str(value.into_owned())),
        Some("null") => parse_null(&value)
            .map(|()| Node::Null)
            .ok_or_else(|| invalid("null")),
        Some("bool") => parse_bool(&value)
            .map(Node::Bool)
            .ok_or_else(|| invalid("boolean")),
        Some("int") => parse_int(&value)?.ok_or_else(|| invalid("integer")),
        Some("float") => parse_f64(&value)
            .map(Node::Float)
            .ok_or_else(|| invalid("float")),
        // Other core tags (`!!binary`, `!!timestamp`, …) read as strings.
        Some(_) => Ok(Node::Str(value.into_owned())),
        // A foreign tag wraps the value as it reads untagged.
        None if style == ScalarStyle::Plain => resolve_plain(value),
        None => Ok(Node::Str(value.into_owned())),
    }
}

/// An untagged plain scalar, resolved in `serde_yaml` 0.9's order: null, bool, integer, float,
/// string.
fn resolve_plain(value: Cow<'_, str>) -> Result<Node, YamlError> {
    if value.is_empty() || parse_null(&value).is_some() {
        return Ok(Node::Null);
    }
    if let Some(b) = parse_bool(&value) {
        return Ok(Node::Bool(b));
    }
    if let Some(n) = parse_int(&value)? {
        return Ok(n);
    }
    if !digits_but_not_number(&value)
        && let Some(f) = parse_f64(&value)
    {
        return Ok(Node::Float(f));
    }
    Ok(Node::Str(value.into_owned()))
}

fn parse_null(s: &str) -> Option<()> {
    matches!(s, "null" | "Null" | "NULL" | "~").then_some(())
}

fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

/// Leading zeros followed by digits make a string in YAML 1.2 (`0123`).
fn digits_but_not_number(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    s.len() > 1 && s.starts_with('0') && s[1..].bytes().all(|b| b.is_ascii_digit())
}

const RADIX_PREFIXES: [(&str, u32); 3] = [("0x", 16), ("0o", 8), ("0b", 2)];

/// An integer literal: `[+]digits`, `0x…`, `0o…`, `0b…` that fit `u64`, else `-digits`,
/// `-0x…`, … that fit `i64`. One that fits only 128 bits is an error, as it was for
/// `serde_yaml`; a longer one is not an integer (and reads as a float).
fn parse_int(s: &str) -> Result<Option<Node>, YamlError> {
    if let Some(n) = parse_unsigned::<u64>(s) {
        return Ok(Some(Node::UInt(n)));
    }
    if let Some(n) = parse_negative::<i64>(s) {
        return Ok(Some(Node::Int(n)));
    }
    if parse_unsigned::<u128>(s).is_some() || parse_negative::<i128>(s).is_some() {
        return Err(YamlError::Syntax(format!(
            "integer {s} is out of the 64-bit range"
        )));
    }
    Ok(None)
}

trait FromRadix: Sized + std::str::FromStr {
    fn from_radix(s: &str, radix: u32) -> Option<Self>;
}

macro_rules! from_radix {
    ($($t:ty),*) => {$(
        impl FromRadix for $t {
            fn from_radix(s: &str, radix: u32) -> Option<Self> {
                <$t>::from_str_radix(s, radix).ok()
            }
        }
    )*};
}
from_radix!(u64, i64, u128, i128);

fn parse_unsigned<T: FromRadix>(s: &str) -> Option<T> {
    let unsigned = s.strip_prefix('+').unwrap_or(s);
    for (prefix, radix) in RADIX_PREFIXES {
        if let Some(rest) = unsigned.strip_prefix(prefix) {
            if rest.starts_with(['+', '-']) {
                return None;
            }
            if let Some(n) = T::from_radix(rest, radix) {
                return Some(n);
            }
        }
    }
    if unsigned.starts_with(['+', '-']) || digits_but_not_number(s) {
        return None;
    }
    unsigned.parse().ok()
}

fn parse_negative<T: FromRadix>(s: &str) -> Option<T> {
    for (prefix, radix) in RADIX_PREFIXES {
        if let Some(rest) = s.strip_prefix('-').and_then(|r| r.strip_prefix(prefix))
            && let Some(n) = T::from_radix(&format!("-{rest}"), radix)
        {
            return Some(n);
        }
    }
    if digits_but_not_number(s) {
        return None;
    }
    s.parse().ok()
}

fn parse_f64(s: &str) -> Option<f64> {
    let unsigned = match s.strip_prefix('+') {
        Some(rest) if rest.starts_with(['+', '-']) => return None,
        Some(rest) => rest,
        None => s,
    };
    if matches!(unsigned, ".inf" | ".Inf" | ".INF") {
        return Some(f64::INFINITY);
    }
    if matches!(s, "-.inf" | "-.Inf" | "-.INF") {
        return Some(f64::NEG_INFINITY);
    }
    if matches!(s, ".nan" | ".NaN" | ".NAN") {
        return Some(f64::NAN);
    }
    unsigned.parse::<f64>().ok().filter(|f| f.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_resolve_like_the_core_schema() {
        let map = parse("a: 1\nb: -2\nc: 0x10\nd: 0123\ne: 1.5\nf: ~\ng: True\nh: '1'\n").unwrap();
        let Node::Map(entries) = map else { panic!() };
        let values: Vec<_> = entries.into_iter().map(|(_, v)| v).collect();
        assert_eq!(
            values,
            [
                Node::UInt(1),
                Node::Int(-2),
                Node::UInt(16),
                Node::Str("0123".into()),
                Node::Float(1.5),
                Node::Null,
                Node::Bool(true),
                Node::Str("1".into()),
            ]
        );
    }

    #[test]
    fn anchors_aliases_depth_and_nodes_are_bounded() {
        assert_eq!(parse("a: &x 1\n"), Err(YamlError::AnchorOrAlias));
        // An alias needs an anchor before it, so an alias alone is a syntax error.
        assert!(matches!(parse("a: *x\n"), Err(YamlError::Syntax(_))));
        assert_eq!(parse("a: &x 1\nb: *x\n"), Err(YamlError::AnchorOrAlias));
        let depth = MAX_FRONTMATTER_DEPTH;
        assert_eq!(parse(&"[".repeat(depth + 1)), Err(YamlError::TooDeep));
        let many = format!("[{}]", "1,".repeat(MAX_FRONTMATTER_NODES));
        assert_eq!(parse(&many), Err(YamlError::TooManyNodes));
        assert!(parse(&format!("{}{}", "[".repeat(depth), "]".repeat(depth))).is_ok());
    }
}
