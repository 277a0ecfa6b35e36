use anyhow::Context;
use clap::Parser;
use registry_server::cli::{Cli, Command, JobsCommand, run_admin};
use registry_server::state::AppState;

/// The server allocates with mimalloc: a search decodes and drops a few hundred records and
/// glibc's allocator spent about 7% of memory-bench's CPU in its free lists. (The benches
/// declare the same in `registry-bench`, so that their figures are the server's.)
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("REGISTRY_LOG")
                .unwrap_or_else(|_| "info,tantivy=warn,ort=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match run() {
        Ok(code) => std::process::ExitCode::from(code as u8),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

fn run() -> anyhow::Result<i32> {
    let cli = Cli::parse();
    let config = cli.load_config()?;
    match &cli.command {
        Command::Serve { .. } => {
            let state = AppState::open(config.clone()).context("start-up failed")?;
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let addr = config.socket_addr();
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("cannot listen on {addr} (setting `bind`)"))?;
                tracing::info!(%addr, data_dir = %config.data_dir.display(), "registry listening");
                let _jobs = registry_server::jobs::spawn_scheduler(&state);
                registry_server::serve(state, listener).await?;
                anyhow::Ok(())
            })?;
            // Requests stopped at their next deadline check; a scheduled job still running
            // (each commits its steps atomically) is not waited for past this.
            rt.shutdown_timeout(std::time::Duration::from_secs(5));
            Ok(0)
        }
        Command::Jobs(JobsCommand::Run { name }) => {
            if !registry_services::JOBS.contains(&name.as_str()) {
                anyhow::bail!(
                    "unknown job {name:?} (known: {})",
                    registry_services::JOBS.join(", ")
                );
            }
            let state = AppState::open(config.clone()).context("start-up failed")?;
            let report = state
                .services
                .run_job(name)
                .map_err(|e| anyhow::anyhow!("{}", e.message))?;
            println!("{}", serde_json::to_string(&report)?);
            Ok(if report.outcome == "ok" { 0 } else { 1 })
        }
        Command::Mcp => {
            let key = std::env::var(registry_server::mcp::KEY_ENV).with_context(|| {
                format!(
                    "set {} to the API key the MCP server acts as",
                    registry_server::mcp::KEY_ENV
                )
            })?;
            let state = AppState::open(config.clone()).context("start-up failed")?;
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            rt.block_on(registry_server::mcp::serve_stdio(state, key.trim()))?;
            Ok(0)
        }
        Command::Knowledge(k) => {
            let state = AppState::open(config.clone()).context("start-up failed")?;
            registry_server::cli::knowledge::run_cli(&state, k)
        }
        other => {
            std::fs::create_dir_all(&config.data_dir).with_context(|| {
                format!(
                    "cannot create the data directory {}",
                    config.data_dir.display()
                )
            })?;
            let store =
                registry_server::state::open_store(&config, 1).context("cannot open the store")?;
            run_admin(store, other, &config)
        }
    }
}
