//! The utoipa side of the bodies whose schemas the domains own: each is declared here or in
//! its route module as a named placeholder, and the OpenAPI document (`crate::openapi`)
//! replaces every placeholder with the schema of the type serde really reads or writes.

/// Declares the utoipa side of a body whose schema the OpenAPI document's `wire_bodies` supplies: a unit struct
/// named like its component (`wire_body!(WriteBody)`), or a server type that derives
/// `JsonSchema` itself (`wire_body!(impl BatchAnswer)`). Its placeholder schema never reaches
/// the served document.
macro_rules! wire_body {
    (impl $t:ident) => {
        impl utoipa::PartialSchema for $t {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::RefOr::T(utoipa::openapi::schema::Schema::Object(
                    utoipa::openapi::schema::Object::new(),
                ))
            }
        }
        impl utoipa::ToSchema for $t {
            fn name() -> std::borrow::Cow<'static, str> {
                stringify!($t).into()
            }
        }
    };
    ($(#[$doc:meta])* $t:ident) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $t;
        $crate::bodies::wire_body!(impl $t);
    };
}
pub(crate) use wire_body;

wire_body!(
    /// A deletion receipt: `registry_core::deletion::Receipt`.
    Receipt
);

/// A `$ref` to a component, for utoipa fields whose schema comes from the OpenAPI document's `wire_bodies`.
pub fn component_ref(name: &str) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    utoipa::openapi::Ref::from_schema_name(name).into()
}

/// An array of `$ref`s to a component.
pub fn array_of(name: &str) -> utoipa::openapi::schema::Array {
    utoipa::openapi::schema::Array::new(component_ref(name))
}
