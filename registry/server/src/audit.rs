//! The audit chain's anchor outside the database: the newest signed checkpoint, kept in a
//! file beside the audit key, so that deleting the newest events together with their
//! checkpoints in the database is still detected.

use std::path::PathBuf;

use registry_core::audit::{Checkpoint, Verification, verify_store};
use registry_core::store::AssetStore;
use registry_core::{CoreError, CoreResult};

use crate::config::Config;

/// `<audit key file>.checkpoint`.
pub fn anchor_path(config: &Config) -> PathBuf {
    let mut p = config.audit_key_path().into_os_string();
    p.push(".checkpoint");
    PathBuf::from(p)
}

/// The anchor, if one was written. A file that exists but does not parse is an error: it is
/// not for this code to decide it never existed.
pub fn read_anchor(config: &Config) -> CoreResult<Option<Checkpoint>> {
    let path = anchor_path(config);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
            CoreError::backend(
                "audit",
                format!("{} is not a checkpoint: {e}", path.display()),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CoreError::backend("audit", e)),
    }
}

/// Signs a checkpoint of the head (when there are new events) and moves the anchor to it.
pub fn checkpoint(store: &dyn AssetStore, config: &Config) -> CoreResult<Option<Checkpoint>> {
    let Some(cp) = store.checkpoint_audit()? else {
        return Ok(None);
    };
    if read_anchor(config)?.is_some_and(|a| a.seq >= cp.seq) {
        return Ok(Some(cp));
    }
    let path = anchor_path(config);
    let tmp = path.with_extension("checkpoint.tmp");
    let io = |e: std::io::Error| CoreError::backend("audit", e);
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(
            serde_json::to_string(&cp)
                .map_err(|e| CoreError::backend("audit", e))?
                .as_bytes(),
        )
        .map_err(io)?;
        f.sync_all().map_err(io)?;
    }
    std::fs::rename(&tmp, &path).map_err(io)?;
    Ok(Some(cp))
}

/// Verifies the whole chain, every checkpoint in the database and the anchor; with `tenant`,
/// reports only that tenant's view (see [`verify_store`]).
pub fn verify(
    store: &dyn AssetStore,
    config: &Config,
    key: &registry_core::audit::AuditKey,
    tenant: Option<&str>,
) -> CoreResult<Verification> {
    let anchor = match read_anchor(config) {
        Ok(a) => a,
        Err(e) => {
            tracing::error!(error = %e, "audit anchor unreadable");
            return Ok(Verification {
                ok: false,
                events: 0,
                broken_at: None,
                reason: Some("the checkpoint kept outside the database is unreadable".into()),
                checkpoints: 0,
            });
        }
    };
    verify_store(store, Some(key), anchor.as_ref(), tenant)
}
