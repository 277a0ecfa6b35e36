//! Webhook delivery, run beside `serve` until shutdown: every `poll_interval_ms` it queues
//! the new events each webhook's key may see (`registry_services::feed::dispatch_once`), then
//! claims due deliveries (leased, so each goes out once across nodes) and sends them, at most
//! `concurrency` at a time, each within `timeout_secs`. A target is resolved and checked
//! again at every attempt, and the connection goes to the address that was checked, so a DNS
//! answer that changes after registration (rebinding) cannot reach a private address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use registry_core::feed::{Delivery, DeliveryStatus, FeedEvent, sign_body, webhook_secret};
use registry_core::{CoreError, FieldError, FieldReason};
use registry_services::feed::{self as feed, RetryPolicy};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::config::WebhooksConfig;
use crate::state::AppState;

/// Longest webhook URL accepted.
pub const MAX_URL_CHARS: usize = 2048;

/// Whether `ip` is a target no webhook may reach unless the operator allows private targets:
/// loopback, private, shared (CGNAT), link-local, unspecified, multicast, broadcast and
/// reserved ranges, in IPv4 and IPv6 (an IPv4-mapped, -compatible or NAT64 address is judged
/// by the IPv4 address inside it).
pub fn forbidden_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_broadcast()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || a >= 240
}

fn forbidden_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return forbidden_v4(v4);
    }
    let s = ip.segments();
    let embedded = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    // IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) reach the IPv4 address inside.
    if s[..6] == [0; 6] && !ip.is_loopback() && !ip.is_unspecified() {
        return forbidden_v4(embedded);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return forbidden_v4(embedded);
    }
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
}

fn bad_url(reason: FieldReason, message: impl Into<String>) -> CoreError {
    CoreError::validation_with(message, FieldError::new("url").reason(reason))
}

/// A webhook URL checked for its form: http or https, a host, no credentials.
pub fn parse_target(url: &str) -> Result<reqwest::Url, CoreError> {
    if url.chars().count() > MAX_URL_CHARS {
        return Err(bad_url(
            FieldReason::InvalidLength,
            format!("a webhook URL has at most {MAX_URL_CHARS} characters"),
        ));
    }
    let u = reqwest::Url::parse(url).map_err(|_| bad_url(FieldReason::Invalid, "not a URL"))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(bad_url(
            FieldReason::Invalid,
            "a webhook URL is http or https",
        ));
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(bad_url(
            FieldReason::Invalid,
            "a webhook URL carries no credentials",
        ));
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err(bad_url(FieldReason::Invalid, "a webhook URL names a host"));
    }
    Ok(u)
}

/// Resolves the target's host and checks every address; answers the address to connect to.
pub async fn resolve_target(
    u: &reqwest::Url,
    allow_private: bool,
    timeout: Duration,
) -> Result<SocketAddr, CoreError> {
    let host = u.host_str().unwrap_or_default();
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = u.port_or_known_default().unwrap_or(443);
    let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::time::timeout(timeout, tokio::net::lookup_host((host.as_str(), port)))
            .await
            .map_err(|_| {
                bad_url(
                    FieldReason::Unresolvable,
                    "the webhook host did not resolve in time",
                )
            })?
            .map_err(|_| {
                bad_url(
                    FieldReason::Unresolvable,
                    "the webhook host does not resolve",
                )
            })?
            .collect(),
    };
    if addrs.is_empty() {
        return Err(bad_url(
            FieldReason::Unresolvable,
            "the webhook host does not resolve",
        ));
    }
    if !allow_private && addrs.iter().any(|a| forbidden_ip(a.ip())) {
        return Err(bad_url(
            FieldReason::ForbiddenTarget,
            "the webhook host resolves to a loopback, private, link-local or multicast \
             address (the operator may allow them with webhooks.allow_private_targets)",
        ));
    }
    Ok(addrs[0])
}

/// The body of a delivery. The delivery id and the time are inside the signed bytes, so a
/// receiver that remembers delivery ids and refuses old timestamps rejects a replay.
#[derive(Debug, Serialize)]
struct DeliveryBody<'a> {
    delivery: &'a str,
    webhook: &'a str,
    /// Unix seconds when this attempt was sent.
    sent_at: i64,
    event: &'a FeedEvent,
}

/// Starts the delivery loop; it ends when `stop` is cancelled.
pub fn spawn(state: AppState, stop: CancellationToken) -> Option<tokio::task::JoinHandle<()>> {
    if !state.config.webhooks.enabled {
        return None;
    }
    Some(tokio::spawn(async move {
        let cfg = state.config.webhooks.clone();
        let every = Duration::from_millis(cfg.poll_interval_ms);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(every) => {}
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = round(&state, &cfg) => {}
            }
        }
    }))
}

/// One round: queue new events, then send what is due.
async fn round(state: &AppState, cfg: &WebhooksConfig) {
    let st = state.clone();
    let lease = Duration::from_secs(cfg.timeout_secs * 2 + 30);
    let limit = cfg.concurrency * 4;
    let claimed = tokio::task::spawn_blocking(move || {
        let store = st.services.backends.store.as_ref();
        if let Err(e) = feed::dispatch_once(store) {
            tracing::warn!(error = %e, "webhook events not queued; will retry");
        }
        store.claim_deliveries(Utc::now(), lease, limit)
    })
    .await;
    let claimed = match claimed {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "webhook deliveries not claimed; will retry");
            return;
        }
        Err(e) => {
            tracing::error!(error = %e, "webhook round panicked");
            return;
        }
    };
    let slots = Arc::new(tokio::sync::Semaphore::new(cfg.concurrency));
    let mut tasks = tokio::task::JoinSet::new();
    for d in claimed {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            break;
        };
        let (st, cfg) = (state.clone(), cfg.clone());
        tasks.spawn(async move {
            attempt(&st, &cfg, d).await;
            drop(permit);
        });
    }
    while tasks.join_next().await.is_some() {}
}

/// Sends one delivery and records its outcome.
async fn attempt(state: &AppState, cfg: &WebhooksConfig, d: Delivery) {
    let st = state.clone();
    let dd = d.clone();
    let prepared = tokio::task::spawn_blocking(move || {
        let store = st.services.backends.store.as_ref();
        let Some(w) = store.webhook(&dd.webhook_id)? else {
            return Ok(None);
        };
        let event = feed::delivery_event(store, &w, &dd)?;
        let key = feed::signing_key(&st.services.options.audit_key);
        let secret = webhook_secret(&key, &w.id, &w.salt);
        Ok::<_, CoreError>(Some((w, event, secret)))
    })
    .await;
    let now = Utc::now();
    let settled = match prepared {
        Ok(Ok(None)) => return,
        Ok(Ok(Some((_, None, _)))) => Delivery {
            status: DeliveryStatus::Withheld,
            updated_at: now,
            ..d
        },
        Ok(Ok(Some((w, Some(event), secret)))) => {
            let policy = RetryPolicy {
                base: Duration::from_millis(cfg.backoff_ms),
                max_delay: Duration::from_secs(cfg.max_backoff_secs),
                max_attempts: cfg.max_attempts,
            };
            match send(cfg, &w.url, &d, &event, &secret).await {
                Ok(()) => Delivery {
                    status: DeliveryStatus::Delivered,
                    attempts: d.attempts + 1,
                    last_error: None,
                    updated_at: now,
                    ..d
                },
                Err(why) => feed::failed(d, &why, &policy, now),
            }
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "webhook delivery not prepared; will retry");
            return;
        }
        Err(e) => {
            tracing::error!(error = %e, "webhook delivery panicked");
            return;
        }
    };
    let st = state.clone();
    let out =
        tokio::task::spawn_blocking(move || st.services.backends.store.settle_delivery(&settled))
            .await;
    if !matches!(out, Ok(Ok(()))) {
        tracing::warn!("a webhook delivery's outcome was not recorded; its lease will lapse");
    }
}

/// One HTTP attempt; the error is a short fixed word (`http 500`, `timeout`, `connect`,
/// `forbidden_target`), never the receiver's text.
async fn send(
    cfg: &WebhooksConfig,
    url: &str,
    d: &Delivery,
    event: &FeedEvent,
    secret: &str,
) -> Result<(), String> {
    let timeout = Duration::from_secs(cfg.timeout_secs);
    let u = parse_target(url).map_err(|_| "invalid_url".to_string())?;
    let addr = resolve_target(&u, cfg.allow_private_targets, timeout)
        .await
        .map_err(|e| {
            e.details()["reason"]
                .as_str()
                .unwrap_or("unresolvable")
                .to_string()
        })?;
    let sent_at = Utc::now().timestamp();
    let body = serde_json::to_vec(&DeliveryBody {
        delivery: &d.id,
        webhook: &d.webhook_id,
        sent_at,
        event,
    })
    .map_err(|_| "encode".to_string())?;
    let host = u.host_str().unwrap_or_default().to_string();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(timeout)
        .connect_timeout(timeout)
        .resolve(&host, addr)
        .build()
        .map_err(|_| "client".to_string())?;
    let resp = client
        .post(u)
        .header("content-type", "application/json")
        .header("user-agent", "harness-registry-webhooks/1")
        .header("x-registry-signature", sign_body(secret, &body))
        .header("x-registry-delivery", &d.id)
        .header("x-registry-timestamp", sent_at.to_string())
        .header("x-registry-event", event.kind.as_str())
        .body(body)
        .send()
        .await
        .map_err(|e| {
            if e.is_timeout() {
                "timeout".to_string()
            } else {
                "connect".to_string()
            }
        })?;
    if resp.status().is_success() {
        Ok(())
    } else {
        Err(format!("http {}", resp.status().as_u16()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_ranges_are_forbidden_in_both_families() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::10.0.0.1",
        ] {
            assert!(forbidden_ip(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:4700::1111", "::ffff:93.184.216.34"] {
            assert!(!forbidden_ip(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn urls_with_credentials_or_other_schemes_are_refused() {
        assert!(parse_target("https://example.com/hook").is_ok());
        assert!(parse_target("ftp://example.com/").is_err());
        assert!(parse_target("https://user:pw@example.com/").is_err());
        assert!(parse_target(&format!("https://e.com/{}", "a".repeat(3000))).is_err());
    }
}
