//! Tests against the real model. Without the model directory they are skipped loudly, except
//! under CI (env `CI` set), where the model must be present and its absence fails them.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use registry_core::error::ErrorCode;
use registry_core::retrieval::Embedder;
use registry_embed::{
    DIM, EmbedError, EmbedderConfig, MODEL_NAME, MODEL_SHA256, MULTILINGUAL_E5_SMALL,
    MiniLmEmbedder, ModelChoice, OnnxEmbedder, resolve_model_dir,
};

fn model_root() -> Option<PathBuf> {
    model_root_for(ModelChoice::AllMiniLmL6V2)
}

fn model_root_for(model: ModelChoice) -> Option<PathBuf> {
    let root = resolve_model_dir(None).expect("model dir resolvable");
    if root.join(model.name()).join("model.onnx").is_file() {
        return Some(root);
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "model not found under {} and CI is set: run scripts/fetch-models.sh",
            root.display()
        );
    }
    eprintln!(
        "\n!!!!! SKIPPED: embedding model not found under {} — run scripts/fetch-models.sh !!!!!\n",
        root.display()
    );
    None
}

fn embedder() -> Option<&'static MiniLmEmbedder> {
    static E: OnceLock<Option<MiniLmEmbedder>> = OnceLock::new();
    E.get_or_init(|| {
        model_root()?;
        Some(
            MiniLmEmbedder::new(EmbedderConfig {
                model: ModelChoice::AllMiniLmL6V2,
                threads: Some(1),
                batch_size: 8,
                ..Default::default()
            })
            .expect("model loads"),
        )
    })
    .as_ref()
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The largest difference between two vectors' components.
fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max)
}

fn norm(a: &[f32]) -> f32 {
    dot(a, a).sqrt()
}

/// About `words` words of varied English prose.
fn prose(words: usize) -> String {
    const SENTENCES: [&str; 6] = [
        "The committee reviewed the budget proposal for the coming year.",
        "Rainfall in the northern valley was unusually heavy this spring.",
        "Engineers replaced the aging bridge cables after a long inspection.",
        "A small bakery on the corner sells bread made from ancient grains.",
        "Researchers measured the migration routes of arctic terns.",
        "The orchestra rehearsed a symphony that had not been played in decades.",
    ];
    let mut out = String::new();
    let mut i = 0;
    while out.split_whitespace().count() < words {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(SENTENCES[i % SENTENCES.len()]);
        i += 1;
    }
    out
}

#[test]
fn info_and_dimensions() {
    let Some(e) = embedder() else { return };
    let info = e.info();
    assert_eq!(info.name, "all-MiniLM-L6-v2");
    assert_eq!(info.digest, MODEL_SHA256);
    assert_eq!(info.dim, 384);
    assert_eq!(info.max_tokens, 256);
    let v = e.embed(&["hello world", ""]).unwrap();
    assert_eq!(v.len(), 2);
    for x in &v {
        assert_eq!(x.len(), DIM);
        assert!((norm(x) - 1.0).abs() < 1e-4, "norm {}", norm(x));
    }
    assert!(e.embed(&[]).unwrap().is_empty());
}

#[test]
fn related_sentences_score_higher() {
    let Some(e) = embedder() else { return };
    let v = e
        .embed(&[
            "A cat sits on the mat",
            "A kitten is resting on a rug",
            "Quarterly revenue grew 5%",
        ])
        .unwrap();
    let related = dot(&v[0], &v[1]);
    let unrelated = dot(&v[0], &v[2]);
    eprintln!("cos(cat, kitten) = {related:.3}, cos(cat, revenue) = {unrelated:.3}");
    assert!(related > unrelated + 0.2, "{related} vs {unrelated}");
    assert!(related > 0.4);
}

/// A text's vector is the same alone and among others of other lengths: all-MiniLM-L6-v2 runs
/// each text alone (its activations are rounded per call), multilingual-e5-small runs batches
/// (its rounding is per row and padding is masked).
#[test]
fn batch_equals_single() {
    let long = prose(120);
    let texts = [
        "short",
        "A somewhat longer sentence about governed registries of agent skills.",
        long.as_str(),
        "合同第三条规定付款期限为三十天。",
        "Another one.",
        "",
    ];
    for e in [embedder(), e5()].into_iter().flatten() {
        let batch = e.embed_texts(&texts).unwrap();
        for (i, t) in texts.iter().enumerate() {
            let single = e.embed_texts(&[t]).unwrap().remove(0);
            let diff = max_abs_diff(&batch[i], &single);
            let model = &e.info().name;
            eprintln!("{model} batch vs single, text {i}: max abs diff {diff:e}");
            assert!(diff < 1e-4, "{model} text {i}: max abs diff {diff}");
        }
    }
}

#[test]
fn window_is_256_not_128() {
    let Some(e) = embedder() else { return };
    let words: Vec<String> = prose(200).split_whitespace().map(str::to_string).collect();
    // The longest word prefix of at most 128 tokens, and a text of about 200 tokens.
    let prefix_of = |target: usize| {
        let mut best = 0;
        for k in 1..=words.len() {
            if e.token_count(&words[..k].join(" ")).unwrap() <= target {
                best = k;
            } else {
                break;
            }
        }
        words[..best].join(" ")
    };
    let head = prefix_of(128);
    let full = prefix_of(200);
    let n_head = e.token_count(&head).unwrap();
    let n_full = e.token_count(&full).unwrap();
    assert!((120..=128).contains(&n_head), "{n_head}");
    assert!((190..=200).contains(&n_full), "{n_full}");
    let v = e.embed(&[head.as_str(), full.as_str()]).unwrap();
    let cos = dot(&v[0], &v[1]);
    eprintln!("cos({n_full}-token text, its first {n_head} tokens) = {cos:.4}");
    assert!(
        cos < 0.9999,
        "a {n_full}-token text embeds like its first {n_head} tokens (cos {cos}): truncated"
    );
}

#[test]
fn long_text_is_refused_and_splits_to_fit() {
    let Some(e) = embedder() else { return };
    let long = format!("{}\n\n{}", prose(300), prose(250));
    let n = e.count_tokens(&long).unwrap();
    assert!(n > 256, "{n}");

    let err = e.embed_texts(&["fits", &long]).unwrap_err();
    assert!(
        matches!(err, EmbedError::TextTooLong { index: 1, tokens, max_tokens: 256 } if tokens == n),
        "{err:?}"
    );
    let core = e.embed(&[&long]).unwrap_err();
    assert_eq!(core.code(), ErrorCode::ValidationFailed);

    let windows = e.split_to_fit(&long).unwrap();
    assert!(windows.len() >= 3, "{windows:?}");
    let mut prev_end = 0;
    for &(s, end) in &windows {
        assert!(s >= prev_end && s < end, "{windows:?}");
        prev_end = end;
        let piece = &long[s..end];
        assert!(e.count_tokens(piece).unwrap() <= 256);
        // Cuts fall after sentence ends in this text.
        assert!(piece.ends_with('.'), "{piece:?}");
    }
    // Only whitespace is left between and around windows.
    let mut covered = String::new();
    for &(s, end) in &windows {
        covered.push_str(&long[s..end]);
    }
    let squash = |s: &str| s.split_whitespace().collect::<String>();
    assert_eq!(squash(&covered), squash(&long));

    let pieces: Vec<&str> = windows.iter().map(|&(s, end)| &long[s..end]).collect();
    assert_eq!(e.embed(&pieces).unwrap().len(), pieces.len());

    assert_eq!(e.split_to_fit("short text").unwrap(), vec![(0, 10)]);
}

#[test]
fn split_without_whitespace_still_fits() {
    let Some(e) = embedder() else { return };
    // Punctuation splits tokens but leaves no whitespace to cut at (a run of over 100
    // characters without punctuation would be a single [UNK]).
    let blob = "alpha-beta/gamma_delta+".repeat(120);
    assert!(e.count_tokens(&blob).unwrap() > 512);
    let windows = e.split_to_fit(&blob).unwrap();
    assert!(windows.len() > 1);
    assert_eq!(windows.first().unwrap().0, 0);
    assert_eq!(windows.last().unwrap().1, blob.len());
    for w in windows.windows(2) {
        assert_eq!(w[0].1, w[1].0);
    }
    for &(s, end) in &windows {
        assert!(e.count_tokens(&blob[s..end]).unwrap() <= 256);
    }
}

fn copy_model(from: &Path, to: &Path) {
    copy_model_dirs(from, to, MODEL_NAME);
}

fn copy_model_dirs(from: &Path, to: &Path, model: &str) {
    for sub in [model, "onnxruntime"] {
        std::fs::create_dir_all(to.join(sub)).unwrap();
        for entry in std::fs::read_dir(from.join(sub)).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), to.join(sub).join(entry.file_name())).unwrap();
        }
    }
}

#[test]
fn corrupt_model_is_reported() {
    let Some(root) = model_root() else { return };
    let tmp = tempfile::tempdir().unwrap();
    copy_model(&root, tmp.path());
    let model = tmp.path().join(MODEL_NAME).join("model.onnx");
    let mut bytes = std::fs::read(&model).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 16] {
        *b ^= 0xA5;
    }
    std::fs::write(&model, bytes).unwrap();
    let err = MiniLmEmbedder::new(EmbedderConfig {
        model: ModelChoice::AllMiniLmL6V2,
        model_dir: Some(tmp.path().to_path_buf()),
        ..Default::default()
    })
    .unwrap_err();
    match &err {
        EmbedError::ModelCorrupt {
            path,
            expected,
            actual,
        } => {
            assert_eq!(path, &model);
            assert_eq!(expected, MODEL_SHA256);
            assert_ne!(actual, MODEL_SHA256);
        }
        other => panic!("expected ModelCorrupt, got {other:?}"),
    }
    assert_eq!(err.code(), ErrorCode::ModelUnavailable);
}

#[test]
fn missing_model_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let absent = tmp.path().join("nope");
    let err = MiniLmEmbedder::new(EmbedderConfig {
        model_dir: Some(absent.clone()),
        ..Default::default()
    })
    .unwrap_err();
    match &err {
        EmbedError::ModelMissing { path, hint } => {
            assert_eq!(path, &absent);
            assert!(hint.contains("fetch-models.sh"));
        }
        other => panic!("expected ModelMissing, got {other:?}"),
    }
    assert_eq!(err.code(), ErrorCode::ModelUnavailable);

    // A directory holding everything but the tokenizer names the missing file.
    let Some(root) = model_root() else { return };
    copy_model(&root, tmp.path());
    let tok = tmp.path().join(MODEL_NAME).join("tokenizer.json");
    std::fs::remove_file(&tok).unwrap();
    let err = MiniLmEmbedder::new(EmbedderConfig {
        model: ModelChoice::AllMiniLmL6V2,
        model_dir: Some(tmp.path().to_path_buf()),
        ..Default::default()
    })
    .unwrap_err();
    assert!(
        matches!(&err, EmbedError::ModelMissing { path, .. } if path == &tok),
        "{err:?}"
    );
}

#[test]
fn concurrent_callers_share_the_embedder() {
    let Some(e) = embedder() else { return };
    let expected = e.embed(&["shared across threads"]).unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let v = e.embed(&["shared across threads"]).unwrap();
                assert_eq!(v, expected);
            });
        }
    });
}

#[test]
fn callers_that_wait_for_the_session_are_run_together_and_each_gets_its_own_vectors() {
    // One session; twelve callers released at once, of one or two texts of different lengths:
    // whoever takes the session runs the earliest waiters' texts with its own (up to a slice).
    let Some(e) = embedder() else { return };
    let long = prose(60);
    let calls: Vec<Vec<String>> = (0..12)
        .map(|i| match i % 4 {
            0 => vec![format!("parcel {i} waits at dock {i}")],
            1 => vec![format!("{long} ({i})")],
            2 => vec![
                format!("短文本 {i}"),
                format!("second text of call {i}, a little longer"),
            ],
            _ => vec![format!("call {i}")],
        })
        .collect();
    let alone: Vec<Vec<Vec<f32>>> = calls
        .iter()
        .map(|c| {
            c.iter()
                .map(|t| e.embed(&[t.as_str()]).unwrap().remove(0))
                .collect()
        })
        .collect();
    for round in 0..3 {
        let start = std::sync::Barrier::new(calls.len());
        std::thread::scope(|s| {
            for (i, call) in calls.iter().enumerate() {
                let (start, want) = (&start, &alone[i]);
                s.spawn(move || {
                    let refs: Vec<&str> = call.iter().map(String::as_str).collect();
                    start.wait();
                    let got = e.embed(&refs).unwrap();
                    assert_eq!(got.len(), want.len(), "round {round}, call {i}");
                    for (j, (g, w)) in got.iter().zip(want).enumerate() {
                        let diff = max_abs_diff(g, w);
                        assert!(diff < 1e-4, "round {round}, call {i}, text {j}: {diff}");
                    }
                });
            }
        });
    }
}

#[test]
fn a_batch_spread_over_sessions_equals_one_session_in_order() {
    let Some(one) = embedder() else { return };
    let three = MiniLmEmbedder::new(EmbedderConfig {
        model: ModelChoice::AllMiniLmL6V2,
        threads: Some(1),
        batch_size: 2,
        sessions: 3,
        ..Default::default()
    })
    .expect("model loads");
    // Seven texts over three sessions: shares of 3, 3 and 1, of different lengths.
    let long = prose(90);
    let texts: Vec<String> = (0..7)
        .map(|i| match i % 3 {
            0 => format!("note {i} about the parcel at dock {i}"),
            1 => format!("{long} ({i})"),
            _ => format!("短文本 {i}"),
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let spread = three.embed(&refs).unwrap();
    let single = one.embed(&refs).unwrap();
    assert_eq!(spread.len(), refs.len());
    for (i, (a, b)) in spread.iter().zip(&single).enumerate() {
        let diff = max_abs_diff(a, b);
        assert!(diff < 1e-4, "text {i}: max abs diff {diff}");
    }
    // Concurrent callers each get their own text's vector.
    std::thread::scope(|s| {
        for (i, t) in refs.iter().enumerate() {
            let (three, want) = (&three, &single[i]);
            s.spawn(move || {
                let got = three.embed(&[t]).unwrap().remove(0);
                let diff = max_abs_diff(&got, want);
                assert!(diff < 1e-4, "text {i} alone: max abs diff {diff}");
            });
        }
    });
}

// ---------------------------------------------------------------- multilingual-e5-small

fn e5() -> Option<&'static OnnxEmbedder> {
    static E: OnceLock<Option<OnnxEmbedder>> = OnceLock::new();
    E.get_or_init(|| {
        model_root_for(ModelChoice::MultilingualE5Small)?;
        Some(
            OnnxEmbedder::new(EmbedderConfig {
                model: ModelChoice::MultilingualE5Small,
                threads: Some(1),
                batch_size: 8,
                ..Default::default()
            })
            .expect("multilingual-e5-small loads"),
        )
    })
    .as_ref()
}

#[test]
fn e5_loads_with_its_own_identity() {
    let Some(e) = e5() else { return };
    let info = e.info();
    assert_eq!(info.name, "multilingual-e5-small");
    assert_eq!(info.digest, MULTILINGUAL_E5_SMALL.model_sha256());
    assert_eq!(info.dim, DIM);
    assert_eq!(info.max_tokens, 256);
    // Vectors it makes carry a tag no MiniLM vector has, so the reindex job re-embeds those.
    assert!(info.tag().starts_with("multilingual-e5-small@"));
    assert_ne!(info.tag(), format!("{MODEL_NAME}@{}", &MODEL_SHA256[..16]));
    let v = e.embed(&["你好，世界", "hello world", ""]).unwrap();
    for x in &v {
        assert_eq!(x.len(), DIM);
        assert!((norm(x) - 1.0).abs() < 1e-4, "norm {}", norm(x));
    }
}

#[test]
fn e5_chinese_paraphrase_is_closer_than_unrelated() {
    let Some(e) = e5() else { return };
    let cases = [
        (
            "如何提高睡眠质量？",
            "保持规律的作息时间，睡前避免使用手机，可以改善睡眠。",
            "今年第三季度公司营收增长了百分之五。",
        ),
        (
            "进度报告",
            "项目周报：本周完成了接口设计，下周开始联调。",
            "红烧肉的做法：五花肉切块焯水。",
        ),
        (
            "用户喜欢深色主题",
            "这位用户偏好编辑器使用暗色模式。",
            "火车将于明天上午九点出发。",
        ),
    ];
    for (query, paraphrase, unrelated) in cases {
        let q = e.embed_query(&[query]).unwrap().remove(0);
        let d = e.embed(&[paraphrase, unrelated]).unwrap();
        let (near, far) = (dot(&q, &d[0]), dot(&q, &d[1]));
        eprintln!("{query}: paraphrase {near:.3}, unrelated {far:.3}");
        assert!(near > far + 0.02, "{query}: {near} vs {far}");
    }
    // Across languages too.
    let q = e.embed_query(&["dark mode preference"]).unwrap().remove(0);
    let d = e
        .embed(&[
            "这位用户偏好编辑器使用暗色模式。",
            "火车将于明天上午九点出发。",
        ])
        .unwrap();
    assert!(dot(&q, &d[0]) > dot(&q, &d[1]));
}

#[test]
fn e5_applies_query_and_document_prefixes() {
    let Some(e) = e5() else { return };
    let spec = e.spec();
    assert_eq!(
        (spec.query_prefix, spec.document_prefix),
        ("query: ", "passage: ")
    );
    // Counting includes the document prefix: it takes room in the window.
    let bare = e.content_tokens("项目周报").unwrap();
    let prefix = e.content_tokens("passage:").unwrap();
    assert!(prefix >= 2, "{prefix}");
    assert_eq!(e.token_count("项目周报").unwrap(), bare + prefix + 2);
    // Query and document vectors of one text differ, and each path is deterministic.
    let text = "项目周报";
    let as_query = e.embed_query(&[text]).unwrap().remove(0);
    let as_doc = e.embed(&[text]).unwrap().remove(0);
    let cos = dot(&as_query, &as_doc);
    assert!(cos < 0.999, "prefixes not applied: cos {cos}");
    assert_eq!(e.embed_queries(&[text]).unwrap().remove(0), as_query);
    assert_eq!(e.embed_texts(&[text]).unwrap().remove(0), as_doc);
    // MiniLM has no prefixes: both paths agree.
    if let Some(m) = embedder() {
        assert_eq!(m.embed_query(&[text]).unwrap(), m.embed(&[text]).unwrap());
    }
}

#[test]
fn e5_window_counts_the_prefix() {
    let Some(e) = e5() else { return };
    let long = format!("{}\n\n{}", prose(300), prose(250));
    let windows = e.split_to_fit(&long).unwrap();
    assert!(windows.len() >= 3, "{windows:?}");
    for &(s, end) in &windows {
        let n = e.count_tokens(&long[s..end]).unwrap();
        assert!(n <= 256, "{n}");
    }
    let pieces: Vec<&str> = windows.iter().map(|&(s, end)| &long[s..end]).collect();
    assert_eq!(e.embed(&pieces).unwrap().len(), pieces.len());
    assert!(matches!(
        e.embed_texts(&[&long]).unwrap_err(),
        EmbedError::TextTooLong {
            max_tokens: 256,
            ..
        }
    ));
}

#[test]
fn e5_corrupt_file_is_refused() {
    let Some(root) = model_root_for(ModelChoice::MultilingualE5Small) else {
        return;
    };
    let name = MULTILINGUAL_E5_SMALL.name;
    for file in ["model.onnx", "tokenizer.json"] {
        let tmp = tempfile::tempdir().unwrap();
        copy_model_dirs(&root, tmp.path(), name);
        let path = tmp.path().join(name).join(file);
        let mut bytes = std::fs::read(&path).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x01;
        std::fs::write(&path, bytes).unwrap();
        let err = OnnxEmbedder::new(EmbedderConfig {
            model: ModelChoice::MultilingualE5Small,
            model_dir: Some(tmp.path().to_path_buf()),
            ..Default::default()
        })
        .unwrap_err();
        let expected = MULTILINGUAL_E5_SMALL
            .files
            .iter()
            .find(|(f, _)| *f == file)
            .unwrap()
            .1;
        match &err {
            EmbedError::ModelCorrupt {
                path: p,
                expected: want,
                actual,
            } => {
                assert_eq!(p, &path);
                assert_eq!(want, expected);
                assert_ne!(actual, expected);
            }
            other => panic!("{file}: expected ModelCorrupt, got {other:?}"),
        }
        assert_eq!(err.code(), ErrorCode::ModelUnavailable);
    }
}

/// Guards a panic: XLM-R's tokenizer gives a lone metaspace token the span of the character after
/// it, so token spans overlap and a cut between the two sliced the text backwards.
#[test]
fn e5_splits_chinese_without_spaces() {
    let Some(e) = e5() else { return };
    let sentence = "泡泡战士是基于《跑跑卡丁车》与《泡泡堂》开发的游戏，由韩国公司开发与发行。";
    let text = format!("泡泡战士. {}", sentence.repeat(30));
    assert!(e.count_tokens(&text).unwrap() > 256);
    let windows = e.split_to_fit(&text).unwrap();
    assert!(windows.len() >= 2, "{windows:?}");
    let mut prev_end = 0;
    let mut covered = String::new();
    for &(s, end) in &windows {
        assert!(s >= prev_end && s < end, "{windows:?}");
        prev_end = end;
        let piece = &text[s..end];
        assert!(e.count_tokens(piece).unwrap() <= 256);
        covered.push_str(piece);
    }
    // Cuts fall after a Chinese full stop; only whitespace is left out.
    for &(_, end) in &windows[..windows.len() - 1] {
        assert!(text[..end].ends_with('。'), "{:?}", &text[..end]);
    }
    let squash = |s: &str| s.split_whitespace().collect::<String>();
    assert_eq!(squash(&covered), squash(&text));

    // No space and no sentence end anywhere: cuts fall between tokens, never inside a span.
    let blob = "泡泡战士是一款游戏，".repeat(60);
    let windows = e.split_to_fit(&blob).unwrap();
    assert!(windows.len() >= 2, "{windows:?}");
    assert_eq!(windows.first().unwrap().0, 0);
    assert_eq!(windows.last().unwrap().1, blob.len());
    for w in windows.windows(2) {
        assert_eq!(w[0].1, w[1].0);
    }
    for &(s, end) in &windows {
        assert!(e.count_tokens(&blob[s..end]).unwrap() <= 256);
    }
}

#[test]
fn repeated_queries_come_from_the_cache_in_order_and_agree_with_the_model() {
    let Some(e) = embedder() else { return };
    // MiniLM has no prefixes, so a query's vector is the stored-text vector of the same text.
    let texts = [
        "which dock does parcel 4f1c go to",
        "who restarted the staging cluster",
        "the VPN certificate expiry date",
    ];
    let model: Vec<Vec<f32>> = texts
        .iter()
        .map(|t| e.embed_texts(&[t]).unwrap().remove(0))
        .collect();
    let first = e.embed_queries(&[texts[0], texts[1]]).unwrap();
    // Hits and a miss mixed in one call, a text twice: every answer in its place.
    let again = e
        .embed_queries(&[texts[1], texts[2], texts[0], texts[1]])
        .unwrap();
    assert_eq!(again.len(), 4);
    assert_eq!(again[0], first[1], "a cached vector is the one computed");
    assert_eq!(again[2], first[0]);
    assert_eq!(again[3], first[1]);
    for (got, want) in [
        (&again[0], &model[1]),
        (&again[1], &model[2]),
        (&again[2], &model[0]),
    ] {
        let cos = dot(got, want);
        assert!(cos > 0.9999, "cos {cos}");
    }
}

/// A whole memory or query longer than the window is read by its prefix within it: the prefix
/// embeds both as a stored text and as a query (each with its own prefix and special tokens),
/// nearly fills the window, and a text that fits is returned whole.
#[test]
fn within_window_embeds_a_long_text_by_its_prefix_under_either_prefix() {
    let models: Vec<&OnnxEmbedder> = [embedder(), e5()].into_iter().flatten().collect();
    assert_eq!(
        models.len(),
        2,
        "both models are fetched by the test command"
    );
    let chinese: String = "会议纪要：本周完成了预算审核，下周安排供应商评估。".repeat(40);
    for m in models {
        let window = m.content_window();
        assert!(window < m.max_tokens(), "{window}");
        for long in [prose(600), chinese.clone()] {
            let head = m.within_window(&long).unwrap();
            assert!(long.starts_with(head) && head.len() < long.len());
            let n = m.content_tokens(head).unwrap();
            assert!(n <= window && n + 8 >= window, "{n} of {window}");
            assert_eq!(m.embed(&[head]).unwrap().len(), 1);
            assert_eq!(m.embed_query(&[head]).unwrap().len(), 1);
        }
        assert_eq!(m.within_window("short text").unwrap(), "short text");
    }
}
