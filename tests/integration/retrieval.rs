//! Retrieval in Chinese (and mixed text) through the API, and the text index rebuilt from the
//! store when its stored format changes or a rebuild was interrupted.

use serde_json::{Value, json};

use crate::common::{TestApp, call};

fn lexical_hits(app: &TestApp, key: &crate::common::Key, query: &str) -> Vec<(String, f64)> {
    let (s, b) = call(app.post(
        key,
        "/v1/memories/search",
        &json!({"query": query, "k": 10}),
    ));
    assert_eq!(s, 200, "{b}");
    b["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["memory"]["id"].as_str().unwrap().to_string(),
                h["breakdown"]["lexical"].as_f64().unwrap(),
            )
        })
        .collect()
}

fn write(app: &TestApp, key: &crate::common::Key, content: &str) -> String {
    let (s, b) = call(app.post(
        key,
        "/v1/memories",
        &json!({"class": "semantic", "content": content}),
    ));
    assert!(s == 200 || s == 201, "{s}: {b}");
    assert_eq!(b["decision"], "accepted", "{b}");
    b["id"].as_str().unwrap().to_string()
}

/// The memory holding `word` is the first hit and is found by the text leg (its lexical part is
/// positive): a Chinese word inside a run of Chinese characters is a term of the index.
#[track_caller]
fn found_by_words(app: &TestApp, key: &crate::common::Key, query: &str, id: &str) {
    let hits = lexical_hits(app, key, query);
    let hit = hits.iter().find(|(h, _)| h == id);
    assert!(hit.is_some_and(|(_, l)| *l > 0.0), "{query}: {hits:?}");
    assert_eq!(hits[0].0, id, "{query}: {hits:?}");
}

#[test]
fn chinese_and_mixed_memories_are_found_by_their_words_and_survive_an_index_rebuild() {
    let mut app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let report = write(&app, &ann, "项目周报每周五下午三点之前提交给张经理审阅。");
    let vpn = write(
        &app,
        &ann,
        "公司的VPN证书在六月到期，需要提前找运维部门续期。",
    );
    let mixed = write(
        &app,
        &ann,
        "The Kubernetes 集群 upgrade is scheduled for the weekend; 请提前通知客户。",
    );
    write(&app, &ann, "The canteen serves soup on Fridays.");
    found_by_words(&app, &ann, "周报什么时候提交", &report);
    found_by_words(&app, &ann, "VPN证书到期", &vpn);
    found_by_words(&app, &ann, "运维部门", &vpn);
    found_by_words(&app, &ann, "集群", &mixed);
    found_by_words(&app, &ann, "kubernetes upgrade", &mixed);

    // A knowledge document in Chinese is found by its words in the text leg alone.
    let (s, doc) = call(app.post(
        &ann,
        "/v1/knowledge/documents",
        &json!({"source_id": "hr/leave.md", "format": "md",
                "content": "# 年假制度\n\n员工入职满一年后每年享有十五天带薪年假，年假需提前两周申请。"}),
    ));
    assert_eq!(s, 201, "{doc}");
    let text_only = |app: &TestApp, key: &crate::common::Key| -> Value {
        let (s, out) = call(app.post(
            key,
            "/v1/knowledge/search",
            &json!({"query": "带薪年假有几天", "legs": "text_only", "min_score": 0.0}),
        ));
        assert_eq!(s, 200, "{out}");
        out
    };
    let out = text_only(&app, &ann);
    assert_eq!(out["evidence"][0]["source_id"], "hr/leave.md", "{out}");

    // Stop, mark the text index as left by an interrupted rebuild, and start again: the index
    // is emptied and rebuilt from the store before the first request, so every entry is back.
    let dir = std::mem::replace(&mut app.dir, tempfile::tempdir().unwrap());
    drop(app);
    let data = dir.path().join("data");
    std::fs::write(
        data.join("text").join(registry_text_index::REBUILD_MARKER),
        b"",
    )
    .unwrap();
    let app = TestApp::start_with(|c| c.data_dir = data.clone());
    assert!(
        !data
            .join("text")
            .join(registry_text_index::REBUILD_MARKER)
            .exists()
    );
    found_by_words(&app, &ann, "周报什么时候提交", &report);
    found_by_words(&app, &ann, "集群", &mixed);
    let out = text_only(&app, &ann);
    assert_eq!(out["evidence"][0]["source_id"], "hr/leave.md", "{out}");
}
