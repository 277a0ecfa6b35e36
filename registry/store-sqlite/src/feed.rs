//! Webhook state of the change feed (`webhooks`, `webhook_deliveries`, migration 0011). One
//! process owns the file, so a claim is one `UPDATE … RETURNING` under the writer.

use std::time::Duration;

use chrono::{DateTime, Utc};
use registry_core::audit::AuditDraft;
use registry_core::feed::{Delivery, DeliveryStatus, FeedKind, FeedStore, WebhookRecord};
use registry_core::store::refuse_nul;
use registry_core::{CoreError, CoreResult};
use rusqlite::{OptionalExtension, Row, params};

use crate::store::{SqliteStore, append_audit, parse_ts, ts};

fn be(e: rusqlite::Error) -> CoreError {
    CoreError::backend("sqlite", e)
}

fn from_micros(m: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(m).unwrap_or_default()
}

const WEBHOOK_COLS: &str = "id, tenant, owner, key_id, url, events, salt, cursor, created_at";
const DELIVERY_COLS: &str =
    "id, webhook_id, seq, kind, status, attempts, next_at, last_error, updated_at";

fn row_to_webhook(r: &Row<'_>) -> rusqlite::Result<WebhookRecord> {
    let events: String = r.get(5)?;
    let created: String = r.get(8)?;
    Ok(WebhookRecord {
        id: r.get(0)?,
        tenant: r.get(1)?,
        owner: r.get(2)?,
        key_id: r.get(3)?,
        url: r.get(4)?,
        events: serde_json::from_str(&events).unwrap_or_default(),
        salt: r.get(6)?,
        cursor: r.get::<_, i64>(7)? as u64,
        created_at: parse_ts(&created)?,
    })
}

fn row_to_delivery(r: &Row<'_>) -> rusqlite::Result<Delivery> {
    let kind: String = r.get(3)?;
    let status: String = r.get(4)?;
    let updated: String = r.get(8)?;
    Ok(Delivery {
        id: r.get(0)?,
        webhook_id: r.get(1)?,
        seq: r.get::<_, i64>(2)? as u64,
        kind: FeedKind::parse(&kind).unwrap_or(FeedKind::TaskStatus),
        status: DeliveryStatus::parse(&status).unwrap_or(DeliveryStatus::Dead),
        attempts: r.get(5)?,
        next_at: from_micros(r.get(6)?),
        last_error: r.get(7)?,
        updated_at: parse_ts(&updated)?,
    })
}

impl FeedStore for SqliteStore {
    fn feed_head(&self) -> CoreResult<u64> {
        let n: i64 = self
            .read(|c| c.query_row("SELECT COALESCE(MAX(seq), 0) FROM audit", [], |r| r.get(0)))?;
        Ok(n as u64)
    }

    fn create_webhook(&self, w: &WebhookRecord, audit: AuditDraft) -> CoreResult<()> {
        refuse_nul([("url", Some(w.url.as_str()))])?;
        let key = self.audit_key().cloned();
        self.write(|tx| {
            tx.execute(
                &format!("INSERT INTO webhooks ({WEBHOOK_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
                params![
                    w.id,
                    w.tenant,
                    w.owner,
                    w.key_id,
                    w.url,
                    serde_json::to_string(&w.events).map_err(|e| CoreError::backend("sqlite", e))?,
                    w.salt,
                    w.cursor as i64,
                    ts(&w.created_at),
                ],
            )
            .map_err(be)?;
            append_audit(tx, audit, key.as_ref())?;
            Ok(())
        })
    }

    fn webhook(&self, id: &str) -> CoreResult<Option<WebhookRecord>> {
        self.read(|c| {
            c.query_row(
                &format!("SELECT {WEBHOOK_COLS} FROM webhooks WHERE id = ?1"),
                [id],
                row_to_webhook,
            )
            .optional()
        })
    }

    fn webhooks(&self, tenant: Option<&str>) -> CoreResult<Vec<WebhookRecord>> {
        self.read(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {WEBHOOK_COLS} FROM webhooks WHERE ?1 IS NULL OR tenant = ?1
                 ORDER BY created_at, id"
            ))?;
            st.query_map([tenant], row_to_webhook)?.collect()
        })
    }

    fn delete_webhook(&self, id: &str, audit: AuditDraft) -> CoreResult<bool> {
        let key = self.audit_key().cloned();
        self.write(|tx| {
            tx.execute("DELETE FROM webhook_deliveries WHERE webhook_id = ?1", [id])
                .map_err(be)?;
            let n = tx
                .execute("DELETE FROM webhooks WHERE id = ?1", [id])
                .map_err(be)?;
            if n > 0 {
                append_audit(tx, audit, key.as_ref())?;
            }
            Ok(n > 0)
        })
    }

    fn advance_webhook(
        &self,
        id: &str,
        from: u64,
        to: u64,
        deliveries: &[Delivery],
    ) -> CoreResult<bool> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "UPDATE webhooks SET cursor = ?3 WHERE id = ?1 AND cursor = ?2",
                    params![id, from as i64, to as i64],
                )
                .map_err(be)?;
            if n == 0 {
                return Ok(false);
            }
            for d in deliveries {
                tx.execute(
                    &format!(
                        "INSERT OR IGNORE INTO webhook_deliveries ({DELIVERY_COLS})
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                    ),
                    params![
                        d.id,
                        d.webhook_id,
                        d.seq as i64,
                        d.kind.as_str(),
                        d.status.as_str(),
                        d.attempts,
                        d.next_at.timestamp_micros(),
                        d.last_error,
                        ts(&d.updated_at),
                    ],
                )
                .map_err(be)?;
            }
            Ok(true)
        })
    }

    fn claim_deliveries(
        &self,
        now: DateTime<Utc>,
        lease: Duration,
        limit: usize,
    ) -> CoreResult<Vec<Delivery>> {
        let now_us = now.timestamp_micros();
        let until = now_us + lease.as_micros() as i64;
        self.write(|tx| {
            let mut st = tx
                .prepare(&format!(
                    "UPDATE webhook_deliveries SET lease_until = ?2
                      WHERE id IN (SELECT id FROM webhook_deliveries
                                    WHERE status = 'pending' AND next_at <= ?1
                                      AND (lease_until IS NULL OR lease_until < ?1)
                                    ORDER BY next_at, seq LIMIT ?3)
                     RETURNING {DELIVERY_COLS}"
                ))
                .map_err(be)?;
            let rows = st
                .query_map(params![now_us, until, limit as i64], row_to_delivery)
                .map_err(be)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(be)?;
            Ok(rows)
        })
    }

    fn settle_delivery(&self, d: &Delivery) -> CoreResult<()> {
        self.write(|tx| {
            tx.execute(
                "UPDATE webhook_deliveries SET status = ?2, attempts = ?3, next_at = ?4,
                        last_error = ?5, updated_at = ?6, lease_until = NULL
                  WHERE id = ?1",
                params![
                    d.id,
                    d.status.as_str(),
                    d.attempts,
                    d.next_at.timestamp_micros(),
                    d.last_error,
                    ts(&d.updated_at),
                ],
            )
            .map_err(be)?;
            Ok(())
        })
    }

    fn deliveries(
        &self,
        webhook_id: &str,
        status: Option<DeliveryStatus>,
        limit: usize,
    ) -> CoreResult<Vec<Delivery>> {
        let status = status.map(DeliveryStatus::as_str);
        self.read(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {DELIVERY_COLS} FROM webhook_deliveries
                  WHERE webhook_id = ?1 AND (?2 IS NULL OR status = ?2)
                  ORDER BY seq DESC LIMIT ?3"
            ))?;
            st.query_map(params![webhook_id, status, limit as i64], row_to_delivery)?
                .collect()
        })
    }

    fn redeliver(
        &self,
        webhook_id: &str,
        delivery_id: &str,
        now: DateTime<Utc>,
    ) -> CoreResult<bool> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "UPDATE webhook_deliveries
                        SET status = 'pending', attempts = 0, next_at = ?3, lease_until = NULL,
                            updated_at = ?4
                      WHERE id = ?2 AND webhook_id = ?1 AND status = 'dead'",
                    params![webhook_id, delivery_id, now.timestamp_micros(), ts(&now)],
                )
                .map_err(be)?;
            Ok(n > 0)
        })
    }
}
