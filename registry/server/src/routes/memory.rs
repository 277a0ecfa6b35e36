//! Memory routes (filled in by the memory work).

use axum::Router;
use utoipa::OpenApi;

use crate::state::AppState;

#[derive(OpenApi)]
#[openapi()]
pub struct MemoryApi;

pub fn router() -> Router<AppState> {
    Router::new()
}
