//! The utoipa side of the bodies whose schemas the domains own: each is declared once, in its
//! route module's `wire_bodies!`, with the type serde really reads or writes, and the OpenAPI
//! document (`crate::openapi`) puts that type's schema under the body's name.

/// The utoipa side of a body whose schema a domain type supplies: an empty schema under the
/// body's name, which the OpenAPI document replaces and which never reaches the served document.
macro_rules! placeholder {
    ($t:ident) => {
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
}
pub(crate) use placeholder;

/// A module's bodies whose schemas come from the types serde really reads or writes, each
/// declared once with that type, and the module's `wire_bodies(&mut WireBodies)` that hands
/// them all to the OpenAPI document. Three forms, each `request` or `answer`:
///
/// - `request WriteBody = registry_memory::WriteRequest;` declares the unit struct `WriteBody`
///   that route annotations name (`body = WriteBody`); its component is `T`'s schema;
/// - `answer BatchAnswer;` is a type of this module that derives `JsonSchema` itself;
/// - `answer use registry_core::asset::AssetMeta;` is a domain type referenced under its own
///   schema name ([`schema_ref`], [`array_of_schema`]).
macro_rules! wire_bodies {
    (@decl $w:ident [$($reg:tt)*]) => {
        /// This module's bodies whose schemas the domains own, each with its type.
        pub(crate) fn wire_bodies($w: &mut $crate::openapi::WireBodies) {
            $($reg)*
        }
    };
    (@decl $w:ident [$($reg:tt)*] $dir:ident use $ty:ty; $($rest:tt)*) => {
        $crate::bodies::wire_bodies!(@decl $w [$($reg)*
            $w.$dir::<$ty>(<$ty as ::schemars::JsonSchema>::schema_name());] $($rest)*);
    };
    (@decl $w:ident [$($reg:tt)*] $(#[$doc:meta])* $dir:ident $t:ident = $ty:ty; $($rest:tt)*) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $t;
        $crate::bodies::placeholder!($t);
        $crate::bodies::wire_bodies!(@decl $w [$($reg)* $w.$dir::<$ty>(stringify!($t));] $($rest)*);
    };
    (@decl $w:ident [$($reg:tt)*] $dir:ident $t:ident; $($rest:tt)*) => {
        $crate::bodies::placeholder!($t);
        $crate::bodies::wire_bodies!(@decl $w [$($reg)* $w.$dir::<$t>(stringify!($t));] $($rest)*);
    };
    ($($body:tt)*) => {
        $crate::bodies::wire_bodies!(@decl w [] $($body)*);
    };
}
pub(crate) use wire_bodies;

/// Bodies that more than one module answers.
pub mod shared {
    crate::bodies::wire_bodies! {
        /// A deletion receipt.
        answer Receipt = registry_core::deletion::Receipt;
    }
}
pub use shared::Receipt;

/// A `$ref` to the component of a body this server declares (`wire_bodies!`).
pub fn component_ref<T: utoipa::ToSchema>()
-> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    utoipa::openapi::Ref::from_schema_name(T::name()).into()
}

/// An array of `$ref`s to the component of a body this server declares.
pub fn array_of<T: utoipa::ToSchema>() -> utoipa::openapi::schema::Array {
    utoipa::openapi::schema::Array::new(component_ref::<T>())
}

/// A `$ref` to a domain type's schema under its own name (`answer use T;` in `wire_bodies!`).
pub fn schema_ref<T: schemars::JsonSchema>()
-> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    utoipa::openapi::Ref::from_schema_name(T::schema_name()).into()
}

/// An array of `$ref`s to a domain type's schema under its own name.
pub fn array_of_schema<T: schemars::JsonSchema>() -> utoipa::openapi::schema::Array {
    utoipa::openapi::schema::Array::new(schema_ref::<T>())
}
