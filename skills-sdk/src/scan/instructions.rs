//! Instructions aimed at the agent: the registry's detector over prose, and the skill-specific
//! rules over every line (exfiltration, concealment, auto-approval, skipped confirmation,
//! memory and agent files, other skills).

use std::sync::LazyLock;

use regex::Regex;
use registry_detect::{Signal, Verdict};

use super::FindingSeverity::{Fail, Warn};
use super::lines::{Line, Place, Sink};

fn re(s: &str) -> Regex {
    Regex::new(s).unwrap_or_else(|e| panic!("scan rule regex {s:?}: {e}"))
}

static SEND: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(send|sends|sending|sent|upload|uploads|uploading|post|posting|forward|forwarding|transmit|exfiltrate|leak|sync|submit|beacon|mail|email|e-mail|deliver|push|pipe|attach|include|copy|curl)\b",
    )
});
static SECRET_OBJECT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(credential|secret|api[ _-]?keys?\b|access[ _-]?tokens?|auth(entication)?[ _-]?tokens?|\btokens?\b|passwords?|passphrase|private[ _-]?keys?|ssh[ _-]?keys?|~?/?\.ssh\b|id_rsa|id_ed25519|\.aws\b|aws[ _-]?(keys?|credentials)|\.env\b|env(ironment)?[ _-]?var|\benv\b|cookies|keychain|wallet|seed phrase|mnemonic|system prompt|clipboard|browser (data|profile|history|passwords)|shell history|bash_history|\.kube|\.netrc|\.npmrc|\.git-credentials|\.pypirc)",
    )
});
static PERSONAL_OBJECT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(conversation|chat history|transcript|messages|emails?\b|user'?s? (data|files|documents|messages|emails|input)|personal (data|information)|contacts|all files|home directory|documents folder|contents of|file contents|source code|repository)",
    )
});
static DESTINATION: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(https?://|\bwebhook|\b[\w.+-]+@[\w-]+\.[a-z]{2,}|\b\d{1,3}(\.\d{1,3}){3}\b|\bto (our|my|the following|this|an external|a remote|a third[- ]party) (server|endpoint|url|address|api|host|collector|e-?mail|inbox|bucket)|pastebin|discord|telegram|ngrok|external (server|endpoint|address|url|host)|remote (server|endpoint|host|url)|third[- ]party (server|endpoint))",
    )
});
static COVERT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(silently|quietly|secretly|covertly|discreetly|stealthily|in the background|without (telling|asking|informing|notifying|alerting)|do not (tell|mention|inform|notify)|don'?t (tell|mention|inform|notify)|every (message|e-?mail|conversation|time|session|request)|all (messages|e-?mails|conversations|files)|hidden)",
    )
});
static BCC: LazyLock<Regex> = LazyLock::new(|| re(r"\b(bcc|blind (carbon )?copy)\b"));
static EMAIL: LazyLock<Regex> = LazyLock::new(|| re(r"\b[\w.+-]+@[\w-]+\.[a-z]{2,}"));
static BCC_ALWAYS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(always|every|each|all (outgoing )?(messages|e-?mails)|silently|quietly|secretly|automatically|without)",
    )
});

static CONCEAL: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"((do not|don'?t|never|without|avoid|no need to) (ever )?(tell|telling|inform|informing|notify|notifying|mention|mentioning|reveal|revealing|alert|alerting|disclose|disclosing|let)\b.{0,40}\b(the )?(user|human|operator|owner|anyone|them)\b",
        r"|(hide|hiding|conceal|concealing|suppress|keep)\b.{0,50}\b(from|secret from|away from) (the )?(user|human|operator|owner)",
        r"|the (user|human|operator) (must|should|will|need) (not|never) (see|know|notice|find out|be told)",
        r"|without the (user|human|operator)'?s? (noticing|knowing|knowledge|awareness)",
        r"|(silently|quietly|secretly|covertly|stealthily|discreetly|invisibly)\b.{0,40}\b(run|execute|install|send|upload|add|modify|edit|delete|remove|write|copy|download|append|update|insert|change|post)\b",
        r"|\b(run|execute|install|send|upload|add|modify|edit|delete|remove|write|copy|download|append|update|insert|change|post)\b.{0,60}\b(silently|quietly|secretly|covertly|stealthily|without the user (knowing|noticing)))"
    ))
});

static AUTO_APPROVE: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(dangerously-skip-permissions|--dangerously|bypass_?permissions|defaultmode\W{0,4}bypass|--yolo\b|yolo mode",
        r"|(auto[- ]?approve|automatically approve|approve|accept|allow|trust) (all|every|any) (tools?|commands?|permissions?|requests?|actions?|tool calls?)",
        r"|always (allow|approve|accept|trust) (all |every |any )?(tools?|commands?|permissions?|requests?|tool calls?)",
        r#"|"?auto_?approve"?\s*[:=]\s*(\[\s*"\*"|true)|"allow"\s*:\s*\[\s*"(\*|bash\(\*\))"|allowedtools\W{0,4}\*"#,
        r"|disable (the |all )?(permission|approval|confirmation|safety) (prompts?|checks?|dialogs?)",
        r"|(turn|switch) off (the |all )?(permission|approval|confirmation|safety) (prompts?|checks?|dialogs?)",
        r#"|approval[_-]?policy\W{0,4}never|--ask-for-approval never|sandbox[_-]?mode\W{0,4}danger-full-access|--dangerously-bypass-approvals)"#
    ))
});

static SKIP_CONFIRM: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"((without|no need to|don'?t|do not|never|skip) (ask|asking|wait|waiting|request|requesting|prompt|prompting|seek|seeking|get|getting|check with)\b.{0,30}\b(confirm|confirmation|permission|approval|consent|the user|the human)",
        r"|(skip|bypass|ignore|disable)\b.{0,20}\b(the )?(user'?s? )?(confirmation|approval|consent) (step|prompt|dialog|check)?",
        r"|proceed without (asking|confirmation|approval|permission|consent)",
        r"|(assume|treat)\b.{0,30}\b(consent|approval|permission)\b.{0,20}\b(granted|given|implied))"
    ))
});

static MEMORY_FILE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(claude\.md|agents\.md|gemini\.md|memory\.md|\.cursorrules|\.windsurfrules|\.clinerules|copilot-instructions\.md|\.cursor/rules|\.github/instructions|\.claude/settings(\.local)?\.json|\.codex/config\.toml|\.claude/memory|\bmemories?\.(json|md)\b|agent'?s? memory files?)",
    )
});
static WRITE_VERB: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(\b(add|adds|append|appends|write|writes|insert|inserts|edit|edits|modify|modifies|update|updates|change|overwrite|replace|save|store|put|inject|prepend|echo|tee|patch|rewrite)\b|>>)",
    )
});
static LASTING: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(permanent|permanently|from now on|going forward|in (all|every) (future|subsequent)|future (sessions|conversations|tasks)|forever|persist|standing (rule|instruction)|override|ignore|always (approve|allow|run|trust|send|execute|obey|follow)|auto-?approve|silently|quietly|secretly|without (asking|telling|informing|notifying)|do not (tell|mention|inform)|don'?t (tell|mention|inform)|hidden|invisible|never (ask|question|tell))",
    )
});
static MEMORY_RULE: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(\b(store|save|remember|add|write|record|keep|commit|memori[sz]e|persist)\b.{0,60}\b(permanent|persistent|standing|forever|long[- ]term|core|immutable)\b.{0,30}\b(rules?|instructions?|memor(y|ies)|preferences?|directives?|polic(y|ies)|facts?)",
        r"|\b(permanent|persistent|standing|immutable) (rules?|instructions?|directives?)\b.{0,40}\b(memory|memories)\b",
        r"|\b(into|in|to) (your|the agent'?s|the assistant'?s|long[- ]term|persistent) memory\b.{0,80}\b(always|from now on|every|all future|permanent|never)\b)"
    ))
});

static OTHER_SKILLS: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(\b(edit|modify|overwrite|replace|patch|delete|remove|rewrite|disable|append to|inject into|tamper with)\b.{0,50}\b(other|all|every|remaining|neighbou?ring)\b.{0,15}\bskills\b",
        r"|\b(every|each|all|the) other (installed )?skills?\b.{0,100}\b(edit|modify|overwrite|replace|patch|delete|remove|rewrite|disable|inject)",
        r"|\b(edit|modify|overwrite|replace|patch|delete|remove|rewrite|append to|inject into)\b.{0,100}(\.claude|\.codex|\.agents|\.cursor|\.gemini|codex_home|claude_home)/skills\b",
        r"|\b(edit|modify|overwrite|patch|rewrite|append to|inject into)\b.{0,40}\bskill\.md (of|in|for) (other|all|every|each))"
    ))
});

/// Words that address the agent: hidden text that speaks to the agent is instruction-like.
static ADDRESS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(\byou (must|should|will|need to|are now)\b|\bignore (all|any|the|previous)\b|\bfrom now on\b|\b(assistant|agent|claude|chatgpt|codex|copilot|the ai|the model)\s*[:,]\s|\b(assistant|agent|claude|the ai|the model),? (must|should|will|always|never|do not|don'?t)\b|^\s*(important|system|instructions?)\s*:)",
    )
});

/// The words of an injection, read in the detector's normalised views.
static INJECTION_WORDS: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(\b(ignore|disregard|forget|override|bypass|discard)\b.{0,30}\b(previous|prior|above|earlier|preceding|all|any|your|system|original|initial|safety|developer|operator)\b.{0,20}\b(instructions?|rules|prompts?|directions|guidelines|guardrails|constraints|polic(y|ies)|programming|directives?)",
        r"|\byou are (now|no longer)\b|\b(developer|god|jailbreak|dan|unrestricted) mode\b|\bdo anything now\b|\bno (longer )?(bound|restricted) by\b|\bwithout (any )?(restrictions|limitations|filters)\b",
        r"|\bnew (system )?(instructions|rules|prompt)\s*:|\b(reveal|print|show|output|repeat|leak|dump)\b.{0,20}\b(your|the) (system prompt|instructions|hidden prompt|initial prompt)",
        r"|<\|?im_start\|?>|\[system\]|\bbegin system prompt)"
    ))
});

pub(crate) fn addresses_agent(low: &str) -> bool {
    ADDRESS.is_match(low)
}

/// The skill-specific instruction rules on one line.
pub(crate) fn line_rules(l: &Line<'_>, sink: &mut Sink<'_>) {
    let t = l.low.as_str();
    if t.trim().is_empty() {
        return;
    }
    // Code says what it does through the script rules; in code only the settings and memory
    // texts an instruction can hide in (auto-approval, permanent rules) are read here.
    let prose = l.place != Place::Code;
    // Exfiltration: a send with a secret and a destination, or covert sending of personal data.
    if prose && SEND.is_match(t) && DESTINATION.is_match(t) {
        if SECRET_OBJECT.is_match(t) {
            sink.hit(
                "instr.exfiltrate",
                Fail,
                l,
                "tells the agent to send secrets or credentials to an outside address",
            );
        } else if PERSONAL_OBJECT.is_match(t) && COVERT.is_match(t) {
            sink.hit(
                "instr.exfiltrate",
                Fail,
                l,
                "tells the agent to send the user's data to an outside address covertly or wholesale",
            );
        }
    }
    if prose && BCC.is_match(t) && EMAIL.is_match(t) && BCC_ALWAYS.is_match(t) {
        sink.hit(
            "instr.exfiltrate",
            Fail,
            l,
            "adds a hidden recipient (BCC) to the user's messages",
        );
    }
    if prose && CONCEAL.is_match(t) {
        sink.hit(
            "instr.conceal",
            Warn,
            l,
            "tells the agent to hide an action or its output from the user",
        );
    }
    if AUTO_APPROVE.is_match(t) {
        sink.hit(
            "instr.auto_approve",
            Fail,
            l,
            "turns off tool permission prompts or approves every tool",
        );
    } else if prose && SKIP_CONFIRM.is_match(t) {
        sink.hit(
            "instr.skip_confirm",
            Warn,
            l,
            "tells the agent to act without asking the user",
        );
    }
    if MEMORY_RULE.is_match(t) {
        sink.hit(
            "instr.memory_write",
            Fail,
            l,
            "stores permanent rules in the agent's memory",
        );
    } else if MEMORY_FILE.is_match(t) && WRITE_VERB.is_match(t) {
        if LASTING.is_match(t) {
            sink.hit(
                "instr.memory_write",
                Fail,
                l,
                "writes lasting or hidden instructions into an agent memory file",
            );
        } else {
            sink.hit(
                "instr.memory_write",
                Warn,
                l,
                "writes an agent memory or instruction file",
            );
        }
    }
    if prose && OTHER_SKILLS.is_match(t) {
        sink.hit(
            "instr.other_skills",
            Fail,
            l,
            "tells the agent to change other skills' files",
        );
    }
}

/// The registry's instruction detector over blocks of prose: an injection fails, hostile
/// steering warns. Returns whether the detector found any block hostile.
pub(crate) fn detector_rules(blocks: &[Vec<&Line<'_>>], sink: &mut Sink<'_>) -> bool {
    let mut instruction_like = false;
    for block in blocks {
        let Some(first) = block.first() else { continue };
        let text: String = block
            .iter()
            .map(|l| l.raw.trim())
            .collect::<Vec<_>>()
            .join("\n");
        if text.split_whitespace().count() < 3 {
            continue;
        }
        let d = registry_detect::detect_instruction(&text);
        if !d.hostile {
            continue;
        }
        instruction_like = true;
        // Skill instructions are directive by nature ("always run the linter"), so the
        // detector's classifier alone decides nothing here: an injection needs its structural
        // or role evidence, hostile steering one of its aims.
        let has = |s: Signal| d.signals.contains(&s);
        let signals = d.signal_names().join(", ");
        let about_attacks = has(Signal::DescribesAttack) || has(Signal::QuotedInstruction);
        // The detector's structural evidence (role markers, forged tool turns, "IMPORTANT:")
        // is everyday Markdown in skills about model APIs, so an injection also needs its
        // words: an order to drop the instructions in force, a new identity, a request for
        // the prompt, a chat-template turn, read in the detector's de-obfuscated view.
        let injection = d.verdict == Verdict::Injection
            && (has(Signal::RoleReassignment)
                || has(Signal::RoleMarker)
                || has(Signal::ToolForgery)
                || has(Signal::PromptDisclosure)
                || has(Signal::OverrideInstructions))
            && {
                let n = registry_detect::normalize(&text);
                INJECTION_WORDS.is_match(&n.text) || INJECTION_WORDS.is_match(&n.marked)
            };
        let aimed = [
            Signal::Exfiltration,
            Signal::ControlBypass,
            Signal::HidesFromOversight,
            Signal::CredentialRequest,
            Signal::Concealment,
        ]
        .into_iter()
        .any(has);
        if injection {
            let line = Line {
                example: first.example || about_attacks,
                ..(*first).clone()
            };
            sink.hit(
                "instr.injection",
                Fail,
                &line,
                format!("the instruction detector reads an injection ({signals})"),
            );
        } else if aimed && !about_attacks {
            sink.hit(
                "instr.steering",
                Warn,
                first,
                format!("the instruction detector reads hostile steering ({signals})"),
            );
        }
    }
    instruction_like
}
