//! Knowledge routes (filled in by the knowledge work).

use axum::Router;
use utoipa::OpenApi;

use crate::state::AppState;

#[derive(OpenApi)]
#[openapi()]
pub struct KnowledgeApi;

pub fn router() -> Router<AppState> {
    Router::new()
}
