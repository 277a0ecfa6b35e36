//! Skills routes (filled in by the skills work).

use axum::Router;
use utoipa::OpenApi;

use crate::state::AppState;

#[derive(OpenApi)]
#[openapi()]
pub struct SkillsApi;

pub fn router() -> Router<AppState> {
    Router::new()
}
