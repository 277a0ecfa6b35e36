//! The services layer's error is the domains' coded error (code, message, machine-readable
//! details already mapped onto the core's code table), so every door answers it the same way.
//! It is `registry_context`'s, the top domain the services wrap, which already converts from
//! every domain's error and from `CoreError`.

pub use registry_context::{Error, Result};
