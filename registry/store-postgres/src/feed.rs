//! Webhook state of the change feed (`webhooks`, `webhook_deliveries`, migration 0009), shared by
//! every node: a cursor moves by compare-and-set, and a delivery is claimed with
//! `FOR UPDATE SKIP LOCKED` and a lease, so that two nodes never send the same one. Semantics
//! are the SQLite store's.

use std::time::Duration;

use chrono::{DateTime, Utc};
use postgres::Row;
use postgres::types::Json;
use registry_core::CoreResult;
use registry_core::audit::AuditDraft;
use registry_core::feed::{Delivery, DeliveryStatus, FeedKind, FeedStore, WebhookRecord};
use registry_core::store::refuse_nul;

use crate::store::{PgStore, append_audit, micros, nul, pg};

const WEBHOOK_COLS: &str = "id, tenant, owner, key_id, url, events, salt, cursor, created_at";
const DELIVERY_COLS: &str =
    "id, webhook_id, seq, kind, status, attempts, next_at, last_error, updated_at";

fn row_to_webhook(r: &Row) -> CoreResult<WebhookRecord> {
    let Json(events): Json<Vec<FeedKind>> = r.try_get(5).map_err(pg)?;
    Ok(WebhookRecord {
        id: r.try_get(0).map_err(pg)?,
        tenant: r.try_get(1).map_err(pg)?,
        owner: r.try_get(2).map_err(pg)?,
        key_id: r.try_get(3).map_err(pg)?,
        url: r.try_get(4).map_err(pg)?,
        events,
        salt: r.try_get(6).map_err(pg)?,
        cursor: r.try_get::<_, i64>(7).map_err(pg)? as u64,
        created_at: r.try_get(8).map_err(pg)?,
    })
}

fn row_to_delivery(r: &Row) -> CoreResult<Delivery> {
    let kind: String = r.try_get(3).map_err(pg)?;
    let status: String = r.try_get(4).map_err(pg)?;
    Ok(Delivery {
        id: r.try_get(0).map_err(pg)?,
        webhook_id: r.try_get(1).map_err(pg)?,
        seq: r.try_get::<_, i64>(2).map_err(pg)? as u64,
        kind: FeedKind::parse(&kind).unwrap_or(FeedKind::TaskStatus),
        status: DeliveryStatus::parse(&status).unwrap_or(DeliveryStatus::Dead),
        attempts: r.try_get::<_, i32>(5).map_err(pg)? as u32,
        next_at: r.try_get(6).map_err(pg)?,
        last_error: r.try_get(7).map_err(pg)?,
        updated_at: r.try_get(8).map_err(pg)?,
    })
}

fn seq(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl FeedStore for PgStore {
    fn feed_head(&self) -> CoreResult<u64> {
        crate::pool::off_runtime(|| {
            self.read(|db| {
                let n: i64 = db
                    .query_one("SELECT COALESCE(MAX(seq), 0)::bigint FROM audit", &[])
                    .map_err(pg)?
                    .get(0);
                Ok(n as u64)
            })
        })
    }

    fn create_webhook(&self, w: &WebhookRecord, audit: AuditDraft) -> CoreResult<()> {
        crate::pool::off_runtime(|| {
            refuse_nul([("url", Some(w.url.as_str()))])?;
            let key = self.audit_key().cloned();
            self.write(|db| {
                db.execute(
                    &format!(
                        "INSERT INTO webhooks ({WEBHOOK_COLS})
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
                    ),
                    &[
                        &w.id,
                        &w.tenant,
                        &w.owner,
                        &w.key_id,
                        &w.url,
                        &Json(&w.events),
                        &w.salt,
                        &seq(w.cursor),
                        &micros(&w.created_at),
                    ],
                )
                .map_err(pg)?;
                append_audit(db, audit, key.as_ref())?;
                Ok(())
            })
        })
    }

    fn webhook(&self, id: &str) -> CoreResult<Option<WebhookRecord>> {
        crate::pool::off_runtime(|| {
            if nul(id) {
                return Ok(None);
            }
            self.read(|db| {
                db.query_opt(
                    &format!("SELECT {WEBHOOK_COLS} FROM webhooks WHERE id = $1"),
                    &[&id],
                )
                .map_err(pg)?
                .as_ref()
                .map(row_to_webhook)
                .transpose()
            })
        })
    }

    fn webhooks(&self, tenant: Option<&str>) -> CoreResult<Vec<WebhookRecord>> {
        crate::pool::off_runtime(|| {
            if tenant.is_some_and(nul) {
                return Ok(vec![]);
            }
            self.read(|db| {
                db.query(
                    &format!(
                        "SELECT {WEBHOOK_COLS} FROM webhooks
                          WHERE $1::text IS NULL OR tenant = $1 ORDER BY created_at, id"
                    ),
                    &[&tenant],
                )
                .map_err(pg)?
                .iter()
                .map(row_to_webhook)
                .collect()
            })
        })
    }

    fn delete_webhook(&self, id: &str, audit: AuditDraft) -> CoreResult<bool> {
        crate::pool::off_runtime(|| {
            if nul(id) {
                return Ok(false);
            }
            let key = self.audit_key().cloned();
            self.write(|db| {
                db.execute(
                    "DELETE FROM webhook_deliveries WHERE webhook_id = $1",
                    &[&id],
                )
                .map_err(pg)?;
                let n = db
                    .execute("DELETE FROM webhooks WHERE id = $1", &[&id])
                    .map_err(pg)?;
                if n > 0 {
                    append_audit(db, audit, key.as_ref())?;
                }
                Ok(n > 0)
            })
        })
    }

    fn advance_webhook(
        &self,
        id: &str,
        from: u64,
        to: u64,
        deliveries: &[Delivery],
    ) -> CoreResult<bool> {
        crate::pool::off_runtime(|| {
            self.transaction(|db| {
                // The row lock makes a second node's compare-and-set wait, then miss.
                let n = db
                    .execute(
                        "UPDATE webhooks SET cursor = $3 WHERE id = $1 AND cursor = $2",
                        &[&id, &seq(from), &seq(to)],
                    )
                    .map_err(pg)?;
                if n == 0 {
                    return Ok(false);
                }
                for d in deliveries {
                    db.execute(
                        &format!(
                            "INSERT INTO webhook_deliveries ({DELIVERY_COLS})
                             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                             ON CONFLICT (webhook_id, seq) DO NOTHING"
                        ),
                        &[
                            &d.id,
                            &d.webhook_id,
                            &seq(d.seq),
                            &d.kind.as_str(),
                            &d.status.as_str(),
                            &(d.attempts as i32),
                            &micros(&d.next_at),
                            &d.last_error,
                            &micros(&d.updated_at),
                        ],
                    )
                    .map_err(pg)?;
                }
                Ok(true)
            })
        })
    }

    fn claim_deliveries(
        &self,
        now: DateTime<Utc>,
        lease: Duration,
        limit: usize,
    ) -> CoreResult<Vec<Delivery>> {
        crate::pool::off_runtime(|| {
            let now = micros(&now);
            let until = now + chrono::Duration::from_std(lease).unwrap_or_default();
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            self.transaction(|db| {
                db.query(
                    &format!(
                        "UPDATE webhook_deliveries SET lease_until = $2
                          WHERE id IN (SELECT id FROM webhook_deliveries
                                        WHERE status = 'pending' AND next_at <= $1
                                          AND (lease_until IS NULL OR lease_until < $1)
                                        ORDER BY next_at, seq LIMIT $3
                                        FOR UPDATE SKIP LOCKED)
                         RETURNING {DELIVERY_COLS}"
                    ),
                    &[&now, &until, &limit],
                )
                .map_err(pg)?
                .iter()
                .map(row_to_delivery)
                .collect()
            })
        })
    }

    fn settle_delivery(&self, d: &Delivery) -> CoreResult<()> {
        crate::pool::off_runtime(|| {
            refuse_nul([("last_error", d.last_error.as_deref())])?;
            self.transaction(|db| {
                db.execute(
                    "UPDATE webhook_deliveries SET status = $2, attempts = $3, next_at = $4,
                            last_error = $5, updated_at = $6, lease_until = NULL
                      WHERE id = $1",
                    &[
                        &d.id,
                        &d.status.as_str(),
                        &(d.attempts as i32),
                        &micros(&d.next_at),
                        &d.last_error,
                        &micros(&d.updated_at),
                    ],
                )
                .map_err(pg)?;
                Ok(())
            })
        })
    }

    fn deliveries(
        &self,
        webhook_id: &str,
        status: Option<DeliveryStatus>,
        limit: usize,
    ) -> CoreResult<Vec<Delivery>> {
        crate::pool::off_runtime(|| {
            if nul(webhook_id) {
                return Ok(vec![]);
            }
            let status = status.map(DeliveryStatus::as_str);
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            self.read(|db| {
                db.query(
                    &format!(
                        "SELECT {DELIVERY_COLS} FROM webhook_deliveries
                          WHERE webhook_id = $1 AND ($2::text IS NULL OR status = $2)
                          ORDER BY seq DESC LIMIT $3"
                    ),
                    &[&webhook_id, &status, &limit],
                )
                .map_err(pg)?
                .iter()
                .map(row_to_delivery)
                .collect()
            })
        })
    }

    fn redeliver(
        &self,
        webhook_id: &str,
        delivery_id: &str,
        now: DateTime<Utc>,
    ) -> CoreResult<bool> {
        crate::pool::off_runtime(|| {
            if nul(webhook_id) || nul(delivery_id) {
                return Ok(false);
            }
            let now = micros(&now);
            self.transaction(|db| {
                let n = db
                    .execute(
                        "UPDATE webhook_deliveries
                            SET status = 'pending', attempts = 0, next_at = $3,
                                lease_until = NULL, updated_at = $3
                          WHERE id = $2 AND webhook_id = $1 AND status = 'dead'",
                        &[&webhook_id, &delivery_id, &now],
                    )
                    .map_err(pg)?;
                Ok(n > 0)
            })
        })
    }
}
