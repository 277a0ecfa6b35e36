//! HTTP routes, one module per area. Each module exports `router()` and an OpenAPI fragment
//! that `crate::openapi` merges.

pub mod system;
pub mod memory;
pub mod knowledge;
pub mod skills;
