//! The audit chain's keeper: signed checkpoints of its head in the store and, as the anchor,
//! the newest one in a file outside the database (beside the audit key), so that deleting the
//! newest events together with their checkpoints in the database is still detected.

use std::path::PathBuf;
use std::sync::Arc;

use registry_core::audit::{AuditKey, Checkpoint, Verification};
use registry_core::store::Store;
use registry_core::verify::verify_store;
use registry_core::{CoreError, CoreResult};

pub struct AuditService {
    store: Arc<dyn Store>,
    key: AuditKey,
    anchor: PathBuf,
}

impl std::fmt::Debug for AuditService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditService")
            .field("anchor", &self.anchor)
            .finish_non_exhaustive()
    }
}

impl AuditService {
    pub fn new(store: Arc<dyn Store>, key: AuditKey, anchor: PathBuf) -> Self {
        AuditService { store, key, anchor }
    }

    /// The anchor, if one was written. A file that exists but does not parse is an error: it
    /// is not for this code to decide it never existed.
    pub fn read_anchor(&self) -> CoreResult<Option<Checkpoint>> {
        match std::fs::read_to_string(&self.anchor) {
            Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
                CoreError::backend(
                    "audit",
                    format!("{} is not a checkpoint: {e}", self.anchor.display()),
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(CoreError::backend("audit", e)),
        }
    }

    /// Signs a checkpoint of the head (when there are new events) and moves the anchor to it.
    pub fn checkpoint(&self) -> CoreResult<Option<Checkpoint>> {
        let Some(cp) = self.store.checkpoint_audit()? else {
            return Ok(None);
        };
        if self.read_anchor()?.is_some_and(|a| a.seq >= cp.seq) {
            return Ok(Some(cp));
        }
        let tmp = self.anchor.with_extension("checkpoint.tmp");
        let io = |e: std::io::Error| CoreError::backend("audit", e);
        {
            use std::io::Write;
            let text = serde_json::to_string(&cp).map_err(|e| CoreError::backend("audit", e))?;
            let mut f = std::fs::File::create(&tmp).map_err(io)?;
            f.write_all(text.as_bytes()).map_err(io)?;
            f.sync_all().map_err(io)?;
        }
        std::fs::rename(&tmp, &self.anchor).map_err(io)?;
        Ok(Some(cp))
    }

    /// Verifies the whole chain, every checkpoint in the database and the anchor; with
    /// `tenant`, reports only that tenant's view (see [`verify_store`]).
    pub fn verify(&self, tenant: Option<&str>) -> CoreResult<Verification> {
        let anchor = match self.read_anchor() {
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
        verify_store(
            self.store.as_ref(),
            Some(&self.key),
            anchor.as_ref(),
            tenant,
        )
    }
}
