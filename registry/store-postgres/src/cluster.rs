//! The change log (`changes`, migration 0005) that the nodes sharing one database follow, the
//! nodes' reports (`nodes`), and the advisory locks that make a job run once across nodes.

use std::time::Duration;

use registry_core::CoreResult;
use registry_core::cluster::{Change, Cluster, JobLock, NodeState};

use crate::store::{PgStore, pg};

/// A session-level advisory lock, held by a connection of its own: closing the connection
/// (dropping this, or the node dying) releases it.
struct AdvisoryLock {
    client: Option<postgres::Client>,
}

impl JobLock for AdvisoryLock {}

impl Drop for AdvisoryLock {
    /// Closing the connection talks to the server (see [`crate::pool::off_runtime`]).
    fn drop(&mut self) {
        let client = self.client.take();
        crate::pool::off_runtime(|| drop(client));
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl Cluster for PgStore {
    fn node_id(&self) -> &str {
        self.node_id.as_deref().unwrap_or("")
    }

    fn changes_after(&self, after: i64, limit: usize) -> CoreResult<Vec<Change>> {
        crate::pool::off_runtime(|| {
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            self.read(|db| {
                Ok(db
                    .query(
                        "SELECT seq, asset_id, node FROM changes WHERE seq > $1 ORDER BY seq LIMIT $2",
                        &[&after, &limit],
                    )
                    .map_err(pg)?
                    .iter()
                    .map(|r| Change {
                        seq: r.get(0),
                        asset_id: r.get(1),
                        node: r.get(2),
                    })
                    .collect())
            })
        })
    }

    fn head_seq(&self) -> CoreResult<i64> {
        crate::pool::off_runtime(|| {
            self.read(|db| {
                Ok(db
                    .query_one(
                        "SELECT GREATEST((SELECT MAX(seq) FROM changes),
                                         (SELECT pruned_through FROM change_log_state))",
                        &[],
                    )
                    .map_err(pg)?
                    .get::<_, Option<i64>>(0)
                    .unwrap_or(0))
            })
        })
    }

    fn pruned_through(&self) -> CoreResult<i64> {
        crate::pool::off_runtime(|| {
            self.read(|db| {
                Ok(db
                    .query_one("SELECT pruned_through FROM change_log_state", &[])
                    .map_err(pg)?
                    .get(0))
            })
        })
    }

    fn applied(&self) -> CoreResult<Option<i64>> {
        crate::pool::off_runtime(|| {
            let node = self.node_id().to_string();
            self.read(|db| {
                Ok(db
                    .query_opt("SELECT applied_seq FROM nodes WHERE node = $1", &[&node])
                    .map_err(pg)?
                    .map(|r| r.get(0)))
            })
        })
    }

    fn report_applied(&self, seq: i64) -> CoreResult<()> {
        crate::pool::off_runtime(|| {
            let node = self.node_id().to_string();
            self.read(|db| {
                db.execute(
                    "INSERT INTO nodes (node, applied_seq, seen_at, started_at)
                     VALUES ($1, $2, now(), now())
                     ON CONFLICT (node) DO UPDATE
                        SET applied_seq = GREATEST(nodes.applied_seq, EXCLUDED.applied_seq),
                            seen_at = now()",
                    &[&node, &seq],
                )
                .map_err(pg)?;
                Ok(())
            })
        })
    }

    fn live_nodes(&self, live_within: Duration) -> CoreResult<Vec<NodeState>> {
        crate::pool::off_runtime(|| {
            let within = secs(live_within);
            self.read(|db| {
                Ok(db
                    .query(
                        "SELECT node, applied_seq, seen_at, started_at FROM nodes
                          WHERE seen_at > now() - make_interval(secs => $1) ORDER BY node",
                        &[&within],
                    )
                    .map_err(pg)?
                    .iter()
                    .map(|r| NodeState {
                        node: r.get(0),
                        applied_seq: r.get(1),
                        seen_at: r.get(2),
                        started_at: r.get(3),
                    })
                    .collect())
            })
        })
    }

    fn prune(&self, live_within: Duration) -> CoreResult<u64> {
        crate::pool::off_runtime(|| {
            let within = secs(live_within);
            self.write(|db| {
                let floor: Option<i64> = db
                    .query_one(
                        "SELECT MIN(applied_seq) FROM nodes
                          WHERE seen_at > now() - make_interval(secs => $1)",
                        &[&within],
                    )
                    .map_err(pg)?
                    .get(0);
                let Some(floor) = floor else { return Ok(0) };
                let n = db
                    .execute("DELETE FROM changes WHERE seq <= $1", &[&floor])
                    .map_err(pg)?;
                db.execute(
                    "UPDATE change_log_state SET pruned_through = GREATEST(pruned_through, $1)",
                    &[&floor],
                )
                .map_err(pg)?;
                Ok(n)
            })
        })
    }

    fn try_lock_job(&self, name: &str) -> CoreResult<Option<Box<dyn JobLock>>> {
        crate::pool::off_runtime(|| {
            let key = crate::migrate::lock_key(&format!(
                "registry-store-postgres/job/{}/{name}",
                self.schema()
            ));
            let mut client = self.dedicated_client()?;
            let got: bool = client
                .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
                .map_err(pg)?
                .get(0);
            Ok(got.then(|| {
                Box::new(AdvisoryLock {
                    client: Some(client),
                }) as Box<dyn JobLock>
            }))
        })
    }
}
