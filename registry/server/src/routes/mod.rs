//! HTTP routes, one module per area. Each module exports `router()` and an OpenAPI fragment
//! that `crate::openapi` merges.

pub mod context;
pub mod deletion;
pub mod knowledge;
pub mod memory;
pub mod retrieve;
pub mod skills;
pub mod system;
pub mod tasks;
