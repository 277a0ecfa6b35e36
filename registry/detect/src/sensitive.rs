//! Secrets and personal data. Every detector is a pattern plus, where a format has one, its
//! checksum (Luhn for card numbers, mod-97 for IBANs, the ISO 7064 check digit and a real birth
//! date for Chinese resident ids), so that ordinary numbers do not trip it. A credential written
//! in prose ("the database password for prod is hunter2", "数据库密码是 abc123") counts only when
//! what follows the copula looks like a value, not like a word of a sentence about passwords
//! ("the password policy requires 12 characters", "密码策略要求12位").

use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde::{Deserialize, Serialize};

use crate::normalize::visible_nfkc;

/// What a detector found. Only the kind is ever reported, never the matched text.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum FindingKind {
    ApiKey,
    AwsAccessKey,
    GithubToken,
    Jwt,
    PrivateKey,
    Password,
    /// A connection string with an embedded password (`postgres://user:pass@host`).
    ConnectionString,
    CardNumber,
    Iban,
    NationalId,
    Email,
    Phone,
}

/// How sensitive a finding is; the caller maps it onto its own sensitivity scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Contact details: personal data, not a secret.
    Confidential,
    /// Credentials, financial and national identifiers.
    Secret,
}

impl FindingKind {
    /// Stable snake_case name.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Credentials and financial or national identifiers are secret; contact details are
    /// confidential personal data.
    pub fn severity(self) -> Severity {
        match self {
            FindingKind::Email | FindingKind::Phone => Severity::Confidential,
            _ => Severity::Secret,
        }
    }

    /// Credentials are never stored as memory, whatever the scope allows.
    pub fn is_credential(self) -> bool {
        matches!(
            self,
            FindingKind::ApiKey
                | FindingKind::AwsAccessKey
                | FindingKind::GithubToken
                | FindingKind::Jwt
                | FindingKind::PrivateKey
                | FindingKind::Password
                | FindingKind::ConnectionString
        )
    }
}

/// Compiles a pattern whose `\b` are ASCII word boundaries: a Unicode `\b` sees no boundary
/// between a Chinese character and a digit ("手机13812345678"), so it would miss them.
fn re(p: &str) -> Regex {
    Regex::new(&p.replace(r"\b", r"(?-u:\b)")).expect("detector pattern compiles")
}

static SIMPLE: LazyLock<Vec<(FindingKind, Regex)>> = LazyLock::new(|| {
    use FindingKind::*;
    vec![
        (
            ApiKey,
            re(r"\bsk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{16,}"),
        ),
        // Stripe secret, restricted and publishable keys.
        (ApiKey, re(r"\b[srp]k_(?:live|test)_[A-Za-z0-9]{16,}")),
        // Well-known prefixed formats (the ones secret scanners such as gitleaks list):
        // Alibaba Cloud and Tencent Cloud access key ids, GitLab, npm, Hugging Face, SendGrid,
        // Google OAuth access tokens, Shopify, DigitalOcean, PyPI, Slack webhooks.
        (ApiKey, re(r"\bLTAI[0-9A-Za-z]{12,24}\b")),
        (ApiKey, re(r"\bAKID[0-9A-Za-z]{13,40}\b")),
        (ApiKey, re(r"\bglpat-[0-9A-Za-z_-]{20,}")),
        (ApiKey, re(r"\bnpm_[A-Za-z0-9]{36}\b")),
        (ApiKey, re(r"\bhf_[A-Za-z0-9]{30,}\b")),
        (ApiKey, re(r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}")),
        (ApiKey, re(r"\bya29\.[0-9A-Za-z_-]{20,}")),
        (ApiKey, re(r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}\b")),
        (ApiKey, re(r"\bdop_v1_[a-f0-9]{64}\b")),
        (ApiKey, re(r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{20,}")),
        (
            ApiKey,
            re(r"hooks\.slack\.com/services/T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{16,}"),
        ),
        (ApiKey, re(r"\bAIza[0-9A-Za-z_-]{35}\b")),
        (ApiKey, re(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
        (ApiKey, re(r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}")),
        (AwsAccessKey, re(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
        (GithubToken, re(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b")),
        (GithubToken, re(r"\bgithub_pat_[A-Za-z0-9_]{20,}")),
        (
            Jwt,
            re(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
        ),
        (
            PrivateKey,
            re(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-\d"),
        ),
        (
            Email,
            re(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"),
        ),
        (
            NationalId,
            re(r"\b[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z]\s?\d{2}\s?\d{2}\s?\d{2}\s?[A-D]\b"),
        ),
    ]
});

static CARD: LazyLock<Regex> = LazyLock::new(|| re(r"\b\d(?:[ -]?\d){12,18}\b"));
static IBAN: LazyLock<Regex> = LazyLock::new(|| re(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b"));
static SSN: LazyLock<Regex> = LazyLock::new(|| re(r"\b(\d{3})-(\d{2})-(\d{4})\b"));
static CN_ID: LazyLock<Regex> = LazyLock::new(|| re(r"\b\d{17}[\dXx]\b"));
/// A UUID (the registry's asset and artifact ids: a version digit 1-8, a variant 8-b): its
/// groups are no phone or card number, however many of them happen to be all digits (about one
/// id in twenty). [`scan_sensitive`] also asks for a hex letter in it, so that digits dressed
/// up as an id are still scanned.
static UUID: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[1-8][0-9A-Fa-f]{3}-[89ABab][0-9A-Fa-f]{3}-[0-9A-Fa-f]{12}\b",
    )
});
static PHONE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?)?\b\d{3,4}[ .-]\d{3,4}(?:[ .-]\d{2,4})?\b|\+\d{8,15}\b|\b(?:\+?86[ -]?)?1[3-9]\d(?:[ -]?\d{4}){2}\b",
    )
});
static CONN: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)\b[a-z][a-z0-9+.-]{1,20}://([^\s:/@]*):([^\s@/]{1,128})@[A-Za-z0-9._-]+")
});

/// A credential named in prose, then a copula, then (maybe) its value. English keys are matched
/// case-insensitively; `qual` is what stands between the key and the copula ("for prod", "of the
/// router", "at the cabin"), within the clause.
static PROSE_EN: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(?i)\b(?P<key>passwords?|passwd|pass|pwd|pw|passcodes?|passphrases?|pins?|pin codes?|",
        r"pin numbers?|creds|credentials?|secrets?|secret keys?|api[ _-]?keys?|api[ _-]?tokens?|",
        r"access keys?|access tokens?|auth tokens?|bearer tokens?|tokens?|private keys?|logins?|otp|",
        r"one[ -]time (?:code|password)|2fa codes?|mfa codes?|recovery codes?|backup codes?|",
        r"master keys?|root password|admin password|seed phrase|recovery phrase|secret phrase|mnemonic|(?:wi-?fi|wpa2?|wlan|network|router) (?:key|pass)|",
        r"combination|(?:door|gate|alarm|safe|lock|locker|keypad|entry|garage|building|vault|access|",
        r"unlock|security|verification|sms|login) codes?)\b",
        r"(?P<qual>(?:[^A-Za-z0-9\n;.!?]+[A-Za-z0-9'._-]+){0,6}?)",
        r"[^A-Za-z0-9\n;.!?]*?(?P<cop>\b(?:is|was|has been|have been) (?:now )?(?:changed|set|reset|updated) to\b|",
        r"\bchanged to\b|\bset to\b|\breset to\b|\bupdated to\b|\bis now\b|\bis still\b|\bis currently\b|",
        r"\bwill be\b|\bshould be\b|\bis\b|\bare\b|\bwas\b|\bwere\b|'s\b|",
        r"\bremains\b|\breads\b|\bbecame\b|\bit'?s\b|[:=]|->|\u{2014}|\u{2013}|\s-\s)",
        r#"\s*(?P<q>["'`]?)(?P<val>[^\s"'`,;]{2,80})(?P<next>\s+[A-Za-z]+)?"#,
    ))
});

/// The value first: "hunter42 is the password for the ops console", "8823 is the door code".
static PROSE_REVERSED: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r#"(?i)(?:^|[\s"'`(])["'`]?(?P<val>[^\s"'`,;:()]{4,64})["'`]?\s+(?:is|was|=|is still|is now)\s+"#,
        r"(?:(?:the|our|my|his|her|their|your|its|a|an)\s+)?(?P<gap>(?:[A-Za-z0-9'._-]+\s+){0,3}?)",
        r"(?P<key>passwords?|passcodes?|passphrases?|pins?|pin codes?|logins?|secrets?|api keys?|",
        r"(?:door|gate|alarm|safe|lock|locker|keypad|entry|garage|building|vault|access|unlock) codes?)\b",
        r"(?P<after>\s+[A-Za-z]+)?",
    ))
});

static PROSE_ZH: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(?i)(?:(?P<key>密码|口令|密钥|秘钥|私钥|令牌|验证码|动态码|校验码|pin码|登录凭证|凭证|api\s*密钥)",
        r"(?P<qual>[^，。；;,\n]{0,12}?)",
        r"(?P<cop>是|为|：|:|=|设置为|设置成|设为|设成|改成|改为|换成|变成|更新为|更新成|重置为|重置成|修改为|修改成|叫做|叫)了?",
        // An English key with a Chinese copula: "VPN 的 password 是 Vx9!kq22".
        r"|(?P<ekey>\bapi\s*key\b|\btoken\b|\bpasswords?\b|\bpasswd\b|\bpwd\b|\bpasscode\b|\bpassphrase\b|\bpin\b)",
        r"(?P<equal>[^，。；;,\n]{0,12}?)",
        r"(?:是|为|设置为|设置成|设为|设成|改成|改为|换成|变成|更新为|更新成|重置为|修改为)了?)",
        r#"\s*["'“”「]?(?P<val>[A-Za-z0-9!@#$%^&*._+/-]{2,80})"#,
        r"(?P<next>\s*(?:位|个字符|字符|个数字|天|次|分钟|小时|个月|年))?",
    ))
});

/// The value first in Chinese: "Lily@2024 是邮箱密码".
static PROSE_ZH_REVERSED: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(?:^|[^A-Za-z0-9!@#$%^&*._+/-])(?P<val>[A-Za-z0-9!@#$%^&*._+/-]{4,64})\s*(?:是|为|就是)",
        r"[^，。；;,\n]{0,8}?的?(?:密码|口令|密钥|登录密码)",
    ))
});

/// Words that follow "password is" in sentences about passwords rather than in a leak.
const NOT_A_VALUE: &[&str] = &[
    "a",
    "an",
    "the",
    "my",
    "your",
    "our",
    "their",
    "his",
    "her",
    "its",
    "this",
    "that",
    "these",
    "those",
    "it",
    "not",
    "no",
    "none",
    "too",
    "very",
    "so",
    "also",
    "still",
    "now",
    "then",
    "just",
    "only",
    "in",
    "on",
    "at",
    "to",
    "for",
    "of",
    "by",
    "from",
    "with",
    "without",
    "under",
    "inside",
    "and",
    "or",
    "but",
    "if",
    "as",
    "about",
    "like",
    "more",
    "less",
    "than",
    "every",
    "each",
    "all",
    "any",
    "some",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "stored",
    "saved",
    "kept",
    "managed",
    "handled",
    "rotated",
    "changed",
    "reset",
    "expired",
    "expiring",
    "expires",
    "required",
    "needed",
    "mandatory",
    "optional",
    "correct",
    "incorrect",
    "wrong",
    "right",
    "invalid",
    "valid",
    "weak",
    "strong",
    "long",
    "short",
    "secure",
    "insecure",
    "same",
    "different",
    "unique",
    "new",
    "old",
    "missing",
    "empty",
    "blank",
    "set",
    "unset",
    "known",
    "unknown",
    "shared",
    "private",
    "public",
    "hidden",
    "encrypted",
    "hashed",
    "salted",
    "case-sensitive",
    "sensitive",
    "simple",
    "complex",
    "easy",
    "hard",
    "good",
    "bad",
    "fine",
    "ok",
    "okay",
    "here",
    "there",
    "below",
    "above",
    "attached",
    "provided",
    "available",
    "unavailable",
    "sent",
    "protected",
    "locked",
    "unlocked",
    "compromised",
    "leaked",
    "exposed",
    "printed",
    "written",
    "generated",
    "random",
    "temporary",
    "temp",
    "usual",
    "default",
    "what",
    "which",
    "who",
    "how",
    "when",
    "where",
    "why",
    "something",
    "anything",
    "nothing",
    "everything",
    "whatever",
    "see",
    "ask",
    "check",
    "use",
    "please",
    "null",
    "secret",
    "password",
    "placeholder",
    "example",
    "sample",
    "dummy",
    "same",
    "nil",
    "n/a",
    "na",
    "tbd",
    "todo",
    "pending",
    "redacted",
    "removed",
    "vault",
    "1password",
    "bitwarden",
    "lastpass",
    "keepass",
    "manager",
    "policy",
    "enabled",
    "disabled",
    "true",
    "false",
    "yes",
    "one",
    "two",
    "three",
    "being",
    "going",
    "getting",
    "forgotten",
    "lost",
    "stolen",
    "case",
    "handled",
    "issued",
    "revoked",
    "active",
    "inactive",
    "needed.",
    "supplied",
    "given",
    "entered",
    "typed",
    "accepted",
    "rejected",
    "denied",
    "wrongly",
    "hardcoded",
    "hard-coded",
    "rotating",
    "updated",
    "sent",
    "emailed",
    "required.",
    "must",
    "should",
    "will",
    "would",
    "can",
    "could",
    "may",
    "might",
    "has",
    "have",
    "had",
    "does",
    "do",
    "did",
    "we",
    "you",
    "they",
    "he",
    "she",
    "i",
    "me",
    "us",
    "them",
    "someone",
    "somewhere",
    "elsewhere",
    "ours",
    "mine",
    "yours",
    "his.",
    "pretty",
    "quite",
    "really",
    "actually",
    "probably",
    "definitely",
    "always",
    "never",
    "often",
    "sometimes",
    "usually",
    "again",
    "back",
    "already",
    "yet",
    "soon",
    "later",
    "today",
    "tomorrow",
    "yesterday",
    "weekly",
    "monthly",
    "daily",
    "annually",
    "quarterly",
];

/// Words that make the value a length or a count ("12 characters", "30 days").
const UNIT_WORDS: &[&str] = &[
    "characters",
    "character",
    "chars",
    "char",
    "digits",
    "digit",
    "letters",
    "letter",
    "symbols",
    "days",
    "day",
    "months",
    "month",
    "minutes",
    "minute",
    "hours",
    "hour",
    "attempts",
    "times",
    "weeks",
    "years",
    "long",
    "bytes",
    "bits",
    "seconds",
    "per",
];

/// Words between the key and the copula that make the sentence about an attribute of
/// passwords, not a password ("the password length is 12", "token limit: 4096").
const ATTRIBUTE_WORDS: &[&str] = &[
    "length",
    "policy",
    "policies",
    "requirement",
    "requirements",
    "rule",
    "rules",
    "manager",
    "reset",
    "resets",
    "change",
    "changes",
    "rotation",
    "expiry",
    "expiration",
    "hint",
    "hints",
    "field",
    "fields",
    "strength",
    "complexity",
    "history",
    "age",
    "prompt",
    "limit",
    "limits",
    "count",
    "counts",
    "budget",
    "usage",
    "size",
    "window",
    "format",
    "lifetime",
    "ttl",
    "validity",
    "scope",
    "scopes",
    "type",
    "types",
    "name",
    "names",
    "label",
    "id",
    "ids",
    "issuer",
    "endpoint",
    "url",
    "path",
    "file",
    "location",
    "owner",
    "flow",
    "process",
    "procedure",
    "screen",
    "page",
    "form",
    "box",
    "input",
    "dialog",
    "protection",
    "protected",
    "storage",
    "store",
    "vault",
    "management",
    "security",
    "generator",
    "recovery",
    "reuse",
    "sharing",
    "spraying",
    "attack",
    "attacks",
    "leak",
    "leaks",
    "breach",
    "timeout",
    "cost",
    "costs",
    "price",
    "pricing",
    "refresh",
    "per",
];

const ZH_ATTRIBUTE: &[&str] = &[
    "长度",
    "策略",
    "规则",
    "要求",
    "复杂度",
    "有效期",
    "过期",
    "位数",
    "强度",
    "格式",
    "管理",
    "至少",
    "最少",
    "最多",
    "找回",
    "重置",
    "修改",
    "流程",
    "提示",
    "输入框",
    "错误",
    "次数",
    "限制",
    "数量",
    "用量",
    "额度",
    "类型",
    "名称",
    "字段",
    "位置",
    "存放",
    "保存",
    "规范",
];

/// Shapes that follow a credential noun without being a secret: algorithms and sizes ("the key
/// is AES-256", "tokens are JWT-based"), placeholders and redactions.
fn looks_like_description(val: &str) -> bool {
    static DESCRIPTION: LazyLock<Regex> = LazyLock::new(|| {
        re(concat!(
            r"(?i)^(?:aes|rsa|sha|md5|hmac|ecdsa|ed25519|hs|rs|es|ps|x)[-_]?\d+(?:-[a-z]+)?$|",
            r"-(?:based|encoded|hashed|signed|bit|bits|long|char|chars|characters|digit|digits|",
            r"protected|only|free|less|style|like)$|^\d+(?:\+|-\d+)?(?:chars?|characters|digits|bits|bytes|[dhms])$|",
            r"^v\d+(?:\.\d+)*$|^[a-z_][a-z_]*(?:\.[a-z_][a-z0-9_]*)+$|^(?:n/a|tbd|todo|none|null|nil|redacted|hidden|masked|\*+|x+|changeme_placeholder)$"
        ))
    });
    DESCRIPTION.is_match(val)
}

/// What kind of credential noun it is: a `Strong` noun names a secret by itself; a `Code` is
/// digits or a short mixed code; a `Weak` noun ("login", "token", "key") only counts with a
/// value that looks generated.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyKind {
    Strong,
    Code,
    Weak,
}

fn key_kind(key: &str) -> KeyKind {
    let k = key.to_lowercase();
    if k.starts_with("pin") || k.contains("code") || k == "otp" || k == "combination" {
        KeyKind::Code
    } else if k.starts_with("login")
        || k.starts_with("token")
        || k.starts_with("secret") && !k.contains("key")
        || k.contains("key") && !k.contains("secret") && !k.contains("private")
        || k.contains("token")
        || k == "pass"
        || k == "pw"
    {
        KeyKind::Weak
    } else {
        KeyKind::Strong
    }
}

/// Values of the shape of a location or a pattern, not of a secret: a URL after the key
/// ("token: https://…", where the value caught is `//host/path`), a regular expression
/// (`\S+`, `\d{6}`) or a format placeholder (`%s`).
fn not_a_secret_shape(val: &str) -> bool {
    val.starts_with("//")
        || val.contains("://")
        || ["\\s", "\\S", "\\d", "\\w", "%s"]
            .iter()
            .any(|p| val.contains(p))
}

fn prose_value_is_secret(
    key: &str,
    qual: &str,
    val: &str,
    next: Option<&str>,
    quoted: bool,
) -> bool {
    let val = val.trim_end_matches(['.', ',', ';', ':', '!', '?', ')', '，', '。']);
    let lower = val.to_lowercase();
    if val.chars().count() < 3 && !val.chars().all(|c| c.is_ascii_digit()) {
        return false;
    }
    if NOT_A_VALUE.contains(&lower.as_str())
        || ATTRIBUTE_WORDS.contains(&lower.as_str())
        || UNIT_WORDS.contains(&lower.as_str())
        || val
            .chars()
            .all(|c| matches!(c, '*' | 'x' | 'X' | '•' | '#' | '.' | '-' | '_'))
        || val.starts_with(['<', '{', '$', '[', '%', '('])
        || val.contains(['(', '[', '{'])
        || looks_like_description(val)
        || not_a_secret_shape(val)
    {
        return false;
    }
    if qual
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| ATTRIBUTE_WORDS.contains(&w))
    {
        return false;
    }
    let next = next.map(|n| n.trim().to_lowercase());
    if next.as_deref().is_some_and(|n| UNIT_WORDS.contains(&n)) {
        return false;
    }
    let digits = val.chars().filter(char::is_ascii_digit).count();
    let letters = val.chars().filter(|c| c.is_alphabetic()).count();
    let symbols = val.chars().count() - digits - letters;
    let mixed_case = val.chars().any(|c| c.is_uppercase()) && val.chars().any(|c| c.is_lowercase());
    // Lower-case words joined by hyphens are a description ("per-project", "read-only"), not a
    // generated value, unless quoted.
    let joined_words = val
        .chars()
        .all(|c| c.is_ascii_lowercase() || c == '-' || c == '_');
    let generated = digits > 0 && letters > 0
        || symbols > 0 && letters > 0 && (!joined_words || quoted)
        || mixed_case;
    match key_kind(key) {
        // "tokens: 1500", "the key is rotated": a token or key value is long and mixed.
        KeyKind::Weak
            if matches!(key.to_lowercase().as_str(), "pass" | "pw") && digits == val.len() =>
        {
            val.len() >= 6
        }
        KeyKind::Weak => val.len() >= 8 && generated || val.len() >= 20 && letters > 0,
        // "the door code for the server room is 5580", "recovery code: 8F4K-22LM".
        KeyKind::Code => {
            (4..=12).contains(&val.len())
                && (digits == val.len()
                    || digits > 0 && letters > 0
                    || digits + symbols == val.len() && digits >= 4)
        }
        KeyKind::Strong if digits == val.len() => val.len() >= 4,
        KeyKind::Strong if letters == val.chars().count() => {
            // A plain word after "password is" is a value only at the end of its clause or in
            // quotes ("the wifi password at the cabin is swordfish"), and not a participle
            // ("the password is changing").
            val.len() >= 4
                && val.is_ascii()
                && (quoted
                    || mixed_case
                    || !(lower.ends_with("ing") || lower.ends_with("ed"))
                        && next.as_deref().is_none_or(|n| {
                            matches!(
                                n,
                                "for"
                                    | "on"
                                    | "at"
                                    | "and"
                                    | "but"
                                    | "so"
                                    | "until"
                                    | "btw"
                                    | "by"
                                    | "now"
                                    | "today"
                                    | "again"
                                    | "lol"
                                    | "fyi"
                            )
                        }))
        }
        KeyKind::Strong => val.len() >= 3 && (generated || digits > 0 || symbols > 0),
    }
}

/// Every match of `r` in `text`, each search starting again where the previous match's `val`
/// group ended: the optional trailing word a match peeks at may be the key of the next one
/// ("user: qa_bot pass: Winter2024!").
fn each_value<'t>(r: &Regex, text: &'t str, mut f: impl FnMut(&Captures<'t>) -> bool) -> bool {
    let mut at = 0;
    while at <= text.len() {
        let Some(c) = r.captures_at(text, at) else {
            return false;
        };
        if f(&c) {
            return true;
        }
        let whole = c.get(0).expect("whole match");
        let next = c
            .name("val")
            .map_or(whole.end(), |v| v.end())
            .max(whole.start() + 1);
        at = next;
        while at < text.len() && !text.is_char_boundary(at) {
            at += 1;
        }
    }
    false
}

/// A user name and a password as a pair: "the staging DB login is admin / Winter2024!".
static USER_PASS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:logins?|creds|credentials|account|admin|root|superuser|user ?name and password|user/pass(?:word)?)\b[^\n.;]{0,30}?(?:\bis\b|\bare\b|:|=)\s*[A-Za-z0-9._@-]{2,40}\s*(?:/|\|)\s*([^\s,;/]{4,64})",
    )
});

fn prose_credential(text: &str) -> bool {
    let en = each_value(&PROSE_EN, text, |c: &Captures| {
        let key = &c["key"];
        let cop = &c["cop"];
        // "pass" alone is a word of ordinary English ("boarding pass"); it counts only as a
        // key in `pass: value` / `pass=value`.
        if (key.eq_ignore_ascii_case("pass") || key.eq_ignore_ascii_case("pw"))
            && !matches!(cop, ":" | "=")
        {
            return false;
        }
        // `pw: dragon`: with a colon or an equals sign "pw" and "pass" are as strong as
        // "password".
        let key =
            if matches!(cop, ":" | "=") && matches!(key.to_lowercase().as_str(), "pass" | "pw") {
                "password"
            } else {
                key
            };
        prose_value_is_secret(
            key,
            &c["qual"],
            &c["val"],
            c.name("next").map(|m| m.as_str()),
            !c["q"].is_empty(),
        )
    });
    let reversed = || {
        PROSE_REVERSED.captures_iter(text).any(|c: Captures| {
            let val = c["val"].trim_end_matches(['.', '!', '?']);
            let digits = val.chars().filter(char::is_ascii_digit).count();
            let letters = val.chars().filter(|c| c.is_ascii_alphabetic()).count();
            let gap_words = c["gap"].split_whitespace().count();
            let after = c.name("after").map(|m| m.as_str().trim().to_lowercase());
            // The value must look generated: a plain word before "is the password" is the
            // subject of a sentence about passwords ("this is the password policy").
            let shaped = letters > 0 && digits > 0 && !looks_like_description(val)
                || digits == val.len() && gap_words <= 1 && val.len() <= 12
                || letters > 0 && val.len() - letters - digits > 0 && val.len() >= 6;
            shaped
                && !after
                    .as_deref()
                    .is_some_and(|a| ATTRIBUTE_WORDS.contains(&a) || UNIT_WORDS.contains(&a))
        })
    };
    let zh = || {
        each_value(&PROSE_ZH, text, |c: &Captures| {
            let (key, qual) = match (c.name("key"), c.name("ekey")) {
                (Some(k), _) => (k.as_str(), c.name("qual").map_or("", |m| m.as_str())),
                (None, Some(k)) => (k.as_str(), c.name("equal").map_or("", |m| m.as_str())),
                (None, None) => return false,
            };
            if ZH_ATTRIBUTE.iter().any(|w| qual.contains(w)) {
                return false;
            }
            if c.name("next").is_some() {
                return false;
            }
            prose_value_is_secret(key, "", &c["val"], None, false)
        })
    };
    let zh_reversed = || {
        PROSE_ZH_REVERSED.captures_iter(text).any(|c: Captures| {
            let val = &c["val"];
            let digits = val.chars().filter(char::is_ascii_digit).count();
            let letters = val.chars().filter(|c| c.is_ascii_alphabetic()).count();
            letters > 0
                && (digits > 0 || val.len() > letters + digits)
                && !looks_like_description(val)
        })
    };
    let pair = || {
        USER_PASS.captures_iter(text).any(|c| {
            let v = c[1].trim_end_matches(['.', '!', '?', ')']);
            let letters = v.chars().filter(|c| c.is_ascii_alphabetic()).count();
            let digits = v.chars().filter(char::is_ascii_digit).count();
            (letters > 0 && digits > 0 || v.len() > letters + digits) && !looks_like_description(v)
        })
    };
    en || reversed() || zh() || zh_reversed() || pair()
}

/// A password with no copula: "user postgres, pass Zebra#2290", "登录密码 Zhang1988", "use the
/// passphrase "correct-horse-battery-7"". Only a value that mixes letters with digits or
/// symbols counts, so "password reset" does not.
static BARE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)(?:\b(?:pass|pw|pwd|password|passcode|passphrase|secret)|密码|口令)\s+["'`“]?([A-Za-z0-9!@#$%^&*._+-]{6,64})"#,
    )
});

/// A Wi-Fi network and its key: "network Guest5G, key sunflower-88", "wifi: Home5G / Tr0pic4l!".
static WIFI: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)\b(?:wi-?fi|wlan|ssid|network|router|hotspot)\b[^\n]{0,40}?\b(?:key|pass|pw|pwd|password)\b\s*[:=]?\s*["'`]?([A-Za-z0-9!@#$%^&*._+-]{6,64})"#,
    )
});

/// "I use Fluffy2019 as my password", "Tiger99 — that's the PIN".
static AS_KEY: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)(?:^|[\s"'`(])["'`]?([A-Za-z0-9!@#$%^&*._+-]{4,64})["'`]?\s+(?:as (?:the|my|our|his|her|their|a) (?:[a-z]+ )?(?:password|passcode|passphrase|pin)|(?:is|was) (?:what i use as )?(?:my|our|his|her|their) (?:[a-z]+ )?(?:password|passcode|pin)\b)"#,
    )
});

/// An access code named by what it opens: "the code for the lockbox is 1234", "office door
/// code: 4455#".
static ACCESS_CODE: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r#"(?i)\b(?:door|gate|lockbox|key ?box|lock|safe|alarm|building|entry|keypad|garage|office|house|apartment|flat|vault|locker|storage|cabinet|voicemail|sim|laptop|phone|unlock|padlock|bike lock)\b[^\n.;]{0,12}?\bcodes?\b"#,
        r#"[^\n.;]{0,20}?(?:\bis\b|\bwas\b|:|=|\bchanged to\b|\bis now\b)\s*["'`]?(?P<val>[0-9#*-]{4,12}|[A-Za-z0-9-]{4,12})(?:$|[^A-Za-z0-9])|"#,
        r#"(?i)(?P<pre>\b[a-z]+\s+)?\bcodes? (?:for|to|of|on) (?:the |our |my |his |her |their )?(?:[a-z]+ )?(?:door|gate|lockbox|key ?box|lock|safe|alarm|building|entry|keypad|garage|office|house|apartment|flat|vault|locker|storage|cabinet|padlock)\b"#,
        r#"[^\n.;]{0,20}?(?:\bis\b|\bwas\b|:|=|\bchanged to\b|\bis now\b)\s*["'`]?(?P<val2>[0-9#*-]{4,12}|[A-Za-z0-9-]{4,12})(?:$|[^A-Za-z0-9])"#,
    ))
});

/// Environment and configuration assignments: `DB_PASS=Sup3rS3cret`, `smtp_password: "x9..."`.
static ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)\b[a-z0-9_.-]*(?:password|passwd|pass|pwd|secret|token|api_?key|access_?key|private_?key|client_?secret)\b["']?\s*[:=]\s*["']?([^\s"'`$<{(\[,;]{6,128})"#,
    )
});

/// A code with no copula: "backup code 83920174", "OTP 482913"; a card's security code.
static BARE_CODE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)\b(?:backup|recovery|2fa|mfa|otp|verification|one-time|sms|login|security) codes?\b\s*[:=#]?\s*(?:is\s+)?(?:\d{6,10}|[a-z0-9]{4,5}-[a-z0-9]{4,5})\b|\botp\s*[:=]?\s*\d{6,8}\b|\b(?:seed|recovery|secret|backup|wallet) (?:phrase|words)\b[^\n]{0,20}?(?:\bis\b|\bare\b|:|=)\s*["']?(?:[a-z]{3,8}[ ,]+){7,}[a-z]{3,8}"#,
    )
});

/// A card's security code: part of the card data, as secret as its number.
static CARD_SECURITY: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\b(?:cvv2?|cvc2?|card security code)\b\s*(?:is|:|=)?\s*\d{3,4}\b"));

/// A quoted word after 密码 / 口令: "口令是“芝麻开门”".
static ZH_QUOTED: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?:密码|口令|暗码)[^，。；;,\n]{0,6}?(?:是|为|：|:)\s*[“"「‘']([^”"」’'\n]{2,24})[”"」’']"#,
    )
});

/// Digits right after 密码 / 口令: "取款密码 860521".
static ZH_DIGITS: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?:密码|口令|密码是|口令是)\s*(\d{6,12})(?:$|[^\d位个次天分小月年])"));

/// "set the mysql root password to Zx!93kLp", and a quoted passphrase of several words ("log in
/// with the passphrase "velvet thunder rises 8"").
static SET_TO: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r#"(?i)\b(?:set|change|changed|reset|update|updated)\b[^\n.;]{0,30}?\b(?:passwords?|passcodes?|passphrases?|pins?|pwd)\b[^\n.;]{0,20}?\bto\s+["'`]?([A-Za-z0-9!@#$%^&*._+-]{4,64})|"#,
        r#"(?i)\b(?:passwords?|passphrases?|passcodes?)\b\s*(?:is|was|:|=|of)?\s*"([a-z0-9!@#$%^&*._+ -]{8,64})""#,
    ))
});

fn bare_credential(text: &str) -> bool {
    let mixed = |v: &str| {
        let v = v.trim_end_matches(['.', ',', ';', '!', '?']);
        let letters = v.chars().filter(|c| c.is_ascii_alphabetic()).count();
        let digits = v.chars().filter(char::is_ascii_digit).count();
        let symbols = v.len() - letters - digits;
        letters > 0
            && (digits > 0 || symbols > 0)
            && !v.starts_with(['$', '<', '{'])
            && !looks_like_description(v)
    };
    let code = |v: &str| {
        let digits = v.chars().filter(char::is_ascii_digit).count();
        digits >= 4 || digits > 0 && v.chars().any(|c| c.is_ascii_alphabetic())
    };
    BARE.captures_iter(text).any(|c| mixed(&c[1]))
        || WIFI.captures_iter(text).any(|c| mixed(&c[1]))
        || AS_KEY.captures_iter(text).any(|c| mixed(&c[1]))
        || ACCESS_CODE.captures_iter(text).any(|c| {
            // "the zip code for the new office is 10115" names a place, not a lock.
            let pre = c.name("pre").map(|m| m.as_str().trim().to_lowercase());
            let not_access = pre.as_deref().is_some_and(|p| {
                matches!(
                    p,
                    "zip"
                        | "postal"
                        | "post"
                        | "area"
                        | "country"
                        | "promo"
                        | "discount"
                        | "coupon"
                        | "voucher"
                        | "error"
                        | "status"
                        | "tracking"
                        | "booking"
                        | "confirmation"
                        | "product"
                        | "source"
                        | "qr"
                        | "bar"
                        | "dress"
                        | "tax"
                        | "sort"
                        | "swift"
                        | "bank"
                        | "airport"
                        | "language"
                        | "colour"
                        | "color"
                        | "billing"
                        | "cost"
                        | "project"
                        | "reference"
                        | "referral"
                )
            });
            !not_access
                && c.name("val")
                    .or_else(|| c.name("val2"))
                    .is_some_and(|m| code(m.as_str()))
        })
        || ASSIGNMENT.captures_iter(text).any(|c| {
            // `your_password_here`, `change-me`: words joined as a placeholder.
            let v = &c[1];
            mixed(v)
                && !v
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_' || c == '-')
        })
        || ZH_DIGITS.is_match(text)
        || BARE_CODE.is_match(text)
        || ZH_QUOTED.is_match(text)
        || SET_TO.captures_iter(text).any(|c| {
            c.get(1)
                .or_else(|| c.get(2))
                .is_some_and(|m| mixed(m.as_str()))
        })
}

fn connection_string(text: &str) -> bool {
    CONN.captures_iter(text).any(|c| {
        let pw = c[2].to_lowercase();
        // Documentation placeholders are not secrets.
        !(matches!(
            pw.as_str(),
            "password" | "pass" | "pwd" | "secret" | "passwd" | "xxx" | "xxxx" | "****"
        ) || pw.starts_with(['$', '<', '{', '%', '['])
            || pw.chars().all(|c| c == '*' || c == 'x'))
    })
}

/// Luhn checksum over the digits of `s` (13 to 19 digits, not all the same).
pub fn luhn_valid(s: &str) -> bool {
    let digits: Vec<u32> = s.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&digits.len()) || digits.iter().all(|d| *d == digits[0]) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            if i % 2 == 1 {
                let x = d * 2;
                if x > 9 { x - 9 } else { x }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// IBAN check: length 15–34 and the ISO 13616 mod-97 remainder is 1.
pub fn iban_valid(s: &str) -> bool {
    let compact: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    if !(15..=34).contains(&compact.len()) || !compact.is_ascii() {
        return false;
    }
    let (head, tail) = compact.split_at(4);
    let mut rem: u32 = 0;
    for c in tail.chars().chain(head.chars()) {
        let v = match c {
            '0'..='9' => c as u32 - '0' as u32,
            'A'..='Z' => c as u32 - 'A' as u32 + 10,
            _ => return false,
        };
        rem = if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        };
    }
    rem == 1
}

/// Chinese resident id: ISO 7064 MOD 11-2 check character.
pub fn cn_id_valid(s: &str) -> bool {
    const W: [u32; 17] = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2];
    const C: [char; 11] = ['1', '0', 'X', '9', '8', '7', '6', '5', '4', '3', '2'];
    let chars: Vec<char> = s.chars().collect();
    if chars.len() != 18 {
        return false;
    }
    let mut sum = 0;
    for (i, w) in W.iter().enumerate() {
        let Some(d) = chars[i].to_digit(10) else {
            return false;
        };
        sum += d * w;
    }
    chars[17].to_ascii_uppercase() == C[(sum % 11) as usize]
}

/// The birth date inside a resident id is a real date (1900–2099); with the check digit this
/// leaves about one random 18-digit number in 300 looking like an id.
fn cn_id_date_plausible(s: &str) -> bool {
    let n = |r: std::ops::Range<usize>| s[r].parse::<u32>().unwrap_or(0);
    let (y, m, d) = (n(6..10), n(10..12), n(12..14));
    (1900..=2099).contains(&y) && (1..=12).contains(&m) && (1..=31).contains(&d)
}

fn ssn_valid(area: &str, group: &str, serial: &str) -> bool {
    area != "000" && area != "666" && !area.starts_with('9') && group != "00" && serial != "0000"
}

/// Every kind of secret or personal data in `text`, sorted and deduplicated. Scans at most the
/// first [`crate::MAX_SCAN_BYTES`], after NFKC (full-width digits count) and with invisible
/// characters removed (a key split by zero-width spaces is still a key).
pub fn scan_sensitive(text: &str) -> Vec<FindingKind> {
    let text = visible_nfkc(text);
    let text = text.as_str();
    let mut out = vec![];
    for (kind, r) in SIMPLE.iter() {
        if r.is_match(text) {
            out.push(*kind);
        }
    }
    // Every credential written in prose names its kind; most texts name none.
    static CREDENTIAL_WORD: LazyLock<Regex> = LazyLock::new(|| {
        re(
            r"(?i)pass|pw|pin|cred|secret|key|token|login|code|otp|phrase|mnemonic|combination|wi-?fi|wlan|ssid|network|router|hotspot|admin|root|account|user|密|口令|令牌|验证码|凭证|动态码",
        )
    });
    if CREDENTIAL_WORD.is_match(text) && (prose_credential(text) || bare_credential(text)) {
        out.push(FindingKind::Password);
    }
    if connection_string(text) {
        out.push(FindingKind::ConnectionString);
    }
    if CARD_SECURITY.is_match(text) {
        out.push(FindingKind::CardNumber);
    }
    let ids: Vec<std::ops::Range<usize>> = UUID
        .find_iter(text)
        .filter(|m| m.as_str().bytes().any(|b| b.is_ascii_alphabetic()))
        .map(|m| m.range())
        .collect();
    let in_id =
        |r: &std::ops::Range<usize>| ids.iter().any(|s| s.start <= r.start && r.end <= s.end);
    let mut number_spans = ids.clone();
    // Long digit runs are card candidates whether or not they pass Luhn; a phone number is
    // never looked for inside one.
    for m in CARD.find_iter(text).filter(|m| !in_id(&m.range())) {
        if luhn_valid(m.as_str()) {
            out.push(FindingKind::CardNumber);
        }
        number_spans.push(m.range());
    }
    if IBAN.find_iter(text).any(|m| iban_valid(m.as_str())) {
        out.push(FindingKind::Iban);
    }
    for c in SSN.captures_iter(text) {
        if ssn_valid(&c[1], &c[2], &c[3]) {
            out.push(FindingKind::NationalId);
            number_spans.push(c.get(0).map(|m| m.range()).unwrap_or_default());
        }
    }
    for m in CN_ID.find_iter(text) {
        if cn_id_valid(m.as_str()) && cn_id_date_plausible(m.as_str()) {
            out.push(FindingKind::NationalId);
            number_spans.push(m.range());
        }
    }
    let phone = PHONE.find_iter(text).any(|m| {
        let digits = m.as_str().chars().filter(char::is_ascii_digit).count();
        (7..=15).contains(&digits)
            && !number_spans
                .iter()
                .any(|s| s.start <= m.start() && m.end() <= s.end)
    });
    if phone {
        out.push(FindingKind::Phone);
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use FindingKind::*;

    #[test]
    fn luhn_and_iban_checksums() {
        assert!(luhn_valid("4111 1111 1111 1111"));
        assert!(luhn_valid("5500-0000-0000-0004"));
        assert!(!luhn_valid("4111 1111 1111 1112"));
        assert!(!luhn_valid("1234"));
        assert!(iban_valid("GB82 WEST 1234 5698 7654 32"));
        assert!(iban_valid("DE89370400440532013000"));
        assert!(!iban_valid("GB82 WEST 1234 5698 7654 33"));
        assert!(cn_id_valid("11010519491231002X"));
        assert!(!cn_id_valid("110105194912310021"));
    }

    #[test]
    fn secrets_are_found_by_kind() {
        let cases: &[(&str, FindingKind)] = &[
            ("my key is sk-abcdefghijklmnop1234567890", ApiKey),
            ("aws AKIAIOSFODNN7EXAMPLE here", AwsAccessKey),
            ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc in the env", ApiKey),
            ("阿里云 AccessKey ID LTAI5tQ8mZx2Rk9PvN3a 先用着", ApiKey),
            ("gitlab glpat-xR4k2Lm9PqT7vW3nZ8sB for the runner", ApiKey),
            (
                "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                GithubToken,
            ),
            (
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                Jwt,
            ),
            ("-----BEGIN RSA PRIVATE KEY-----\nMIIE", PrivateKey),
            ("-----BEGIN PRIVATE KEY-----", PrivateKey),
            ("-----BEGIN OPENSSH PRIVATE KEY-----", PrivateKey),
            ("db password=hunter2", Password),
            ("数据库密码：abc123", Password),
            ("pay with 4111 1111 1111 1111 please", CardNumber),
            ("the card's CVV is 319", CardNumber),
            ("IBAN GB82 WEST 1234 5698 7654 32", Iban),
            ("ssn 123-45-6789", NationalId),
            ("身份证 11010519491231002X", NationalId),
            ("身份证号11010519491231002X，请核对", NationalId),
            ("write to ann@example.com", Email),
            ("call +1 415 555 2671", Phone),
            ("手机 13812345678", Phone),
            ("手机13812345678联系", Phone),
            ("他的电话是138-1234-5678", Phone),
            ("工行卡号6222020200112233446已绑定", CardNumber),
            ("ＡＫＩＡＩＯＳＦＯＤＮＮ７ＥＸＡＭＰＬＥ", AwsAccessKey),
            ("sk-abcdefgh\u{200B}ijklmnop1234567890", ApiKey),
            // Beside an id, a number is still found.
            (
                "see 01a25176-4490-7312-8622-709a06b0d10e, call +1 415 555 2671",
                Phone,
            ),
        ];
        for (text, kind) in cases {
            let f = scan_sensitive(text);
            assert!(f.contains(kind), "{text:?} → {f:?}");
        }
    }

    /// A UUID whose groups happen to be all digits is an id, not a phone or card number (an
    /// evidence item naming a document was refused as a phone number in a tenant memory).
    #[test]
    fn ids_are_not_numbers() {
        for text in [
            "01a25176-4490-7312-8622-709a06b0d10e",
            "doc:01a25176-4490-7312-8622-709a06b0d10e#intro",
            "see 1234567e-1234-7123-8123-123456789012 for the source",
            "0190b1c2-5555-7555-9555-555555555555",
        ] {
            assert_eq!(scan_sensitive(text), vec![], "{text:?}");
        }
        // Digits in an id's shape without a hex letter, or without a UUID's version digit, are
        // scanned as digits.
        for text in [
            "41111111-1111-7111-8111-111111111111",
            "4155552a-4155-9526-0104-155552671041",
        ] {
            assert!(!scan_sensitive(text).is_empty(), "{text:?}");
        }
    }

    #[test]
    fn credentials_written_in_prose() {
        for text in [
            "the database password for prod is hunter2",
            "The admin passcode is 4412.",
            "root creds: admin/Tr0ub4dor",
            "token for the API is 9f8e7d6c5b4a3210",
            "FYI the wifi password at the cabin is swordfish",
            "user: deploy pass: letmein99",
            "the staging api key = a8f5f167f44f4964e6c998dee827110c",
            "数据库密码是abc123",
            "服务器的root口令为 Passw0rd!",
            "API 密钥：a8f5f167f44f4964",
            "测试环境的登录密码设置为qwerty2024",
            "门禁密码是 8823",
            "prod db: user postgres, pass Zebra#2290",
            "支付宝登录密码 Zhang1988",
            // The value first, a possessive copula, a verb, a quoted passphrase, a pair.
            "hunter42 is the password for the ops console",
            "4471 is the PIN for the company card",
            "jenkins user is ci-bot and its password's q8Lm2vXz.",
            "Set the mysql root password to Zx!93kLp during install.",
            "log in with the passphrase \"velvet thunder rises 8\" on the HSM",
            "Heads up, the staging DB login is admin / Winter2024! until we rotate it.",
            "Remember the wifi at the office: network Guest5G, key sunflower-88.",
            "Staging login — user: qa_bot pass: Winter2024!",
            "the password of the app user is h7Yt-qq2P.",
            "公司邮箱的密码我改成了 Lily@2024。",
            "路由器管理员密码设置成了 zhang1990。",
            "VPN 的 password 是 Vx9!kq22，记得下周改。",
            "the code for the lockbox is 4455",
            "office door code: 7731#",
            "export DB_PASS=Sup3rS3cret",
            "smtp_password: \"x9Kq!mm2\"",
            "I use Fluffy2019 as my password everywhere",
            "pass for the wifi: 12345678",
            "The master password — Tiger&Lily99",
            "我的取款密码 860521",
            "pw: dragon",
            "2FA backup code 83920174, keep it safe",
            "seed phrase: abandon ability able about above absent absorb abstract absurd abuse access accident",
            "登录口令是“芝麻开门”",
        ] {
            let f = scan_sensitive(text);
            assert!(f.contains(&Password), "{text:?} → {f:?}");
        }
        for text in [
            "connect with postgres://app:s3cr3t@db.internal:5432/main",
            "MONGO_URL=mongodb+srv://admin:Zx9!kk@cluster0.abc.mongodb.net",
            "redis://:hunter22@cache:6379",
        ] {
            let f = scan_sensitive(text);
            assert!(f.contains(&ConnectionString), "{text:?} → {f:?}");
        }
    }

    #[test]
    fn ordinary_text_has_no_findings() {
        for text in [
            "I always take the train to work",
            "The meeting is on 2024-05-01 at 10:30",
            "Order 4111 1111 1111 1112 was shipped",
            "We sold 1234567 units in 2023",
            "Ann prefers dark mode and short answers",
            "version 1.2.3 was released",
            "ssn-like 000-12-3456 is not valid",
            "I forgot my password yesterday and had to reset it",
            "the password policy requires 12 characters",
            "The password is stored in 1Password, ask Maria",
            "my password is too short for the new rules",
            "The minimum password length is 12",
            "Tokens are rotated every 90 days",
            "token limit: 4096 per request",
            "the API key is in the vault",
            "Password: see the team vault",
            "a password reset link expires after 30 minutes",
            "use postgres://user:password@localhost/db in the docs example",
            r#"curl -H "Authorization: Bearer $TOKEN" https://api.internal/v1/health"#,
            r#"const REDACT = /(api[_-]?key|password|token)\s*[:=]\s*\S+/gi; // mask secrets"#,
            "the token endpoint: https://auth.internal/oauth/token",
            "DATABASE_URL=postgres://app:${DB_PASSWORD}@db/main",
            "boarding pass is in my email",
            "密码策略要求12位",
            "我昨天忘记密码了，重新设置了一个",
            "密码长度为12位，必须包含数字",
            "验证码为6位数字",
            "密码要定期更换",
            "订单号20240501123456789已发货",
            "Sprint goal: ship the SSO login; stretch: export to CSV.",
            "The API key is per-project and scoped to read-only.",
            "Password: (see 1Password)",
            "password = os.environ[\"DB_PASSWORD\"]",
            "token = get_token(scope=\"read\")",
            "The key is AES-256 and lives in the KMS.",
            "Tokens are JWT-based and signed by the auth service.",
            "The discount code SPRING24 gives 10% off until May.",
            "2024 is the year we moved the password vault to the cloud.",
            "Keep this secret from the admins: the party is on Friday.",
            "The password is wrong, I keep getting locked out.",
            "Set the password length to 16 in the generator.",
            "初始密码为身份证后六位，首次登录必须修改。",
            "Token 的 expiry 设置成 15 分钟。",
            "The zip code for the new office is 10115.",
            "password = os.environ[\"DB_PASSWORD\"]",
            "DB_PASSWORD=your_password_here",
            "The error code for the gate controller is E-404.",
            "密码6位数字，不能是生日。",
            "The verification code is sent by SMS and expires in 5 minutes.",
            "口令是什么我忘了，要去问管理员。",
            "The seed phrase is written on paper in the safe deposit box.",
        ] {
            assert_eq!(scan_sensitive(text), vec![], "{text:?}");
        }
    }
}
