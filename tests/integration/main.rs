//! One integration binary for the `registry` server: real SQLite, real HTTP, the real binary
//! where a test needs a process (kill -9, configuration errors, the CLI).

mod access;
mod auth;
mod cluster;
#[allow(dead_code)]
mod common;
mod context;
mod contract;
mod cost;
mod deletion;
mod feed;
mod foundation;
mod governance;
mod harness;
mod impact;
mod knowledge;
mod memory;
mod retrieval;
mod security;
mod skill_doors;
mod skills;
mod skills_proof;
mod skills_scan;
mod tasks;
mod ui;
