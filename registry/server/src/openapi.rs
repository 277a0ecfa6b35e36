//! The OpenAPI 3 document, generated from the route annotations of every module.

use axum::Json;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Harness Registry",
        description = "A governed registry for the memory, knowledge and skills of AI agents."
    ),
    modifiers(&BearerAuth)
)]
struct BaseApi;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let c = doc.components.get_or_insert_with(Default::default);
        c.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// The merged document.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = BaseApi::openapi();
    doc.merge(crate::routes::system::SystemApi::openapi());
    doc.merge(crate::routes::memory::MemoryApi::openapi());
    doc.merge(crate::routes::knowledge::KnowledgeApi::openapi());
    doc.merge(crate::routes::skills::SkillsApi::openapi());
    doc.merge(crate::routes::deletion::DeletionApi::openapi());
    doc.merge(crate::routes::context::ContextApi::openapi());
    doc.merge(crate::routes::retrieve::RetrieveApi::openapi());
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    doc
}

pub async fn serve_openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(document())
}
