//! Deserializers for the wire: a struct in a request body is read from a JSON object only.
//!
//! serde's derived `Deserialize` for a struct also accepts a JSON array of its fields in order
//! (`"scope": [null, null]` reads as a scope with no tenant, the global one), which the
//! document refuses (`type: object`). The request types take their nested structs through
//! these functions (`#[serde(deserialize_with = …)]`), so the server refuses what the document
//! refuses; untagged enums included, since the refusal comes from the visitor.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

struct ObjectVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map))
    }
}

/// `T` from a JSON object, never from an array.
pub fn object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    d.deserialize_map(ObjectVisitor(PhantomData))
}

/// An optional `T` from a JSON object or `null` (with `#[serde(default)]` for a missing one).
pub fn object_opt<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    Ok(Option::<Object<T>>::deserialize(d)?.map(|o| o.0))
}

/// `T` read by [`object`], for the places a type is needed (an option's or a list's item).
#[derive(serde::Deserialize)]
#[serde(bound = "T: Deserialize<'de>")]
struct Object<T>(#[serde(deserialize_with = "object")] T);

/// A list of `T`, each from a JSON object.
pub fn objects<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    struct ListVisitor<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for ListVisitor<T> {
        type Value = Vec<T>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an array of objects")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            // At most 4,096 slots up front: the length is the client's word.
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(Object(v)) = seq.next_element::<Object<T>>()? {
                out.push(v);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(ListVisitor(PhantomData))
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use crate::Scope;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        #[serde(default, deserialize_with = "super::object_opt")]
        scope: Option<Scope>,
        #[serde(default, deserialize_with = "super::objects")]
        scopes: Vec<Scope>,
    }

    #[test]
    fn a_struct_is_read_from_an_object_only() {
        let ok: Body = serde_json::from_str(
            r#"{"scope": {"tenant": "acme"}, "scopes": [{"tenant": "a"}, {}]}"#,
        )
        .unwrap();
        assert_eq!(ok.scope.unwrap().tenant.as_deref(), Some("acme"));
        assert_eq!(ok.scopes.len(), 2);
        let none: Body = serde_json::from_str(r#"{"scope": null}"#).unwrap();
        assert!(none.scope.is_none() && none.scopes.is_empty());
        // The sequence form serde's derive accepts for a struct is refused, at any depth.
        for bad in [
            r#"{"scope": [null, null]}"#,
            r#"{"scope": []}"#,
            r#"{"scopes": [[null]]}"#,
            r#"{"scopes": {"tenant": "a"}}"#,
        ] {
            let e = serde_json::from_str::<Body>(bad).unwrap_err().to_string();
            assert!(e.contains("invalid type"), "{bad}: {e}");
        }
        // Without the helper, the array would have read as the global scope.
        let quirk: Scope = serde_json::from_str("[null, null]").unwrap();
        assert_eq!(quirk, Scope::default());
    }
}
