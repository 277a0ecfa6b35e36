//! Scheduling the maintenance jobs inside `serve`: one periodic task per job with a non-zero
//! interval (`config.jobs`). The jobs themselves are the services' (`Services::run_job`).

use std::time::Duration;

use crate::state::AppState;

/// Starts the periodic tasks. Runs of one job never overlap: each task awaits its run before
/// sleeping again, and on a store several nodes share a job runs once across them.
pub fn spawn_scheduler(state: &AppState) -> Vec<tokio::task::JoinHandle<()>> {
    let cfg = &state.config.jobs;
    if !cfg.enabled {
        return vec![];
    }
    let mut handles = vec![];
    for (name, secs) in [
        ("consolidate", cfg.consolidate_interval_secs),
        ("decay", cfg.decay_interval_secs),
        ("retention", cfg.retention_interval_secs),
        ("purge", cfg.purge_interval_secs),
        ("checkpoint", cfg.audit_checkpoint_interval_secs),
    ] {
        if secs == 0 {
            continue;
        }
        let st = state.clone();
        handles.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(secs));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let s = st.clone();
                let every = Duration::from_secs(secs);
                match tokio::task::spawn_blocking(move || s.services.run_scheduled_job(name, every))
                    .await
                {
                    Ok(Ok(None)) => {
                        tracing::debug!(job = name, "another node runs this job");
                    }
                    Ok(Ok(Some(r))) => tracing::info!(job = name, outcome = %r.outcome, counts = %r.counts, "job finished"),
                    Ok(Err(e)) => tracing::error!(job = name, error = %e, "job failed"),
                    Err(e) => tracing::error!(job = name, error = %e, "job panicked"),
                }
            }
        }));
    }
    handles
}
