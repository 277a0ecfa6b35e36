//! HTTP routes, one module per area. Each module exports `router()` and an OpenAPI fragment
//! that `crate::openapi` merges. A route is a door: it parses, calls one service
//! (`registry_services`) and answers; it never names a backend (store, index, vector store),
//! so a rule the services apply cannot be skipped by a route that reads the store itself.
//! `routes_name_no_backend` below holds that for `routes/` and `mcp/`.

pub mod context;
pub mod deletion;
pub mod feed;
pub mod knowledge;
pub mod memory;
pub mod retrieve;
pub mod skill_proof;
pub mod skills;
pub mod system;
pub mod tasks;

#[cfg(test)]
mod tests {
    /// What a door may not name: the services' backends, a store or index crate, a store trait.
    const BACKEND_NAMES: &[&str] = &[
        "backends",
        "registry_store_",
        "registry_text_index",
        "registry_vector_",
        "rusqlite",
        "tantivy",
        "qdrant",
        "AssetStore",
        "KeyStore",
    ];

    #[test]
    fn routes_name_no_backend() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut offences = vec![];
        let mut read = 0;
        for dir in ["routes", "mcp"] {
            for entry in std::fs::read_dir(src.join(dir)).expect("read the source directory") {
                let path = entry.expect("entry").path();
                if path.extension().is_none_or(|x| x != "rs") {
                    continue;
                }
                read += 1;
                let text = std::fs::read_to_string(&path).expect("read a route module");
                // The module's code, not its tests (this test names what it looks for).
                let code = text.split("#[cfg(test)]").next().unwrap_or_default();
                for (i, line) in code.lines().enumerate() {
                    let code = line.split("//").next().unwrap_or_default();
                    for name in BACKEND_NAMES.iter().filter(|n| code.contains(**n)) {
                        offences.push(format!("{}:{}: names `{name}`", path.display(), i + 1));
                    }
                }
            }
        }
        assert!(
            read >= 8,
            "only {read} door modules found under {}",
            src.display()
        );
        assert!(
            offences.is_empty(),
            "doors that name a backend:\n{}",
            offences.join("\n")
        );
    }
}
