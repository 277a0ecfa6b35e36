//! What code would do to the machine: egress with secret reads, decode-and-execute, piping a
//! download into a shell, suspicious hosts, persistence, destruction, privilege.

use std::sync::LazyLock;

use regex::Regex;

use super::FindingSeverity::{Fail, Warn};
use super::lines::{Kind, Line, Place, Sink};
use super::packages;

fn re(s: &str) -> Regex {
    Regex::new(s).unwrap_or_else(|e| panic!("scan rule regex {s:?}: {e}"))
}

static EGRESS: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(\b(curl|wget|ncat|netcat|socat|scp|rsync|sftp|tftp)\b|\bnc\s+(-\w+\s+)*[\w.$-]+\s+\d+",
        r"|requests\.(get|post|put|patch|request)|\brequests\.session|\bhttpx\.|urllib|urlopen|http\.client|aiohttp|socket\.(socket|create_connection)",
        r"|smtplib|ftplib|paramiko|\bfetch\(|axios|xmlhttprequest|\bhttps?\.(request|get)\(|net\.connect|sendbeacon|websocket",
        r"|invoke-webrequest|invoke-restmethod|\biwr\b|\birm\b|net\.webclient|uploadstring|uploadfile|uploaddata|system\.net\.|send-mailmessage",
        r"|/dev/tcp/|\bgh gist create|\bmail -s|sendmail|nodemailer|dns\.resolve|\bnslookup\b.*\$|\bdig\b.*\$)"
    ))
});

static SECRET_READ: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(~/\.ssh|\$home/\.ssh|\$\{home\}/\.ssh|\.ssh/(id_|config)|\bid_(rsa|dsa|ecdsa|ed25519)\b|['\x22/]\.ssh['\x22]|\.aws/(credentials|config)|\.aws['\x22]|aws_secret_access_key",
        r"|\.azure/|gcloud/(credentials|application_default)|application_default_credentials|\.kube/config|\.docker/config\.json",
        r"|\.netrc|\.npmrc|\.pypirc|\.git-credentials|\.gnupg|\.password-store|find-(generic|internet)-password|dump-keychain|/etc/shadow",
        r"|login data|cookies\.sqlite|/cookies\b|\bweb data\b|logins\.json|key[34]\.db|\.mozilla/firefox|(google/chrome|google-chrome|chromium|bravesoftware|brave-browser|microsoft/edge)\W.{0,30}(default|profile|user data|login data|cookies|local state)|user data/default",
        r"|wallet\.dat|\.electrum|metamask|exodus|solana/id\.json|\.bitcoin|\.ethereum/keystore|\.bash_history|\.zsh_history|_history['\x22]|consolehost_history",
        r"|os\.environ\)|os\.environ\.items\(\)|json\.stringify\(process\.env\)|object\.(entries|keys|values)\(process\.env\)|\bprintenv\b|\benv\s*\||\$\(env\)|`env`",
        r"|get-childitem\s+env:|\bgci\s+env:|\bls\s+env:|getenvironmentvariables\(\)|\bset\s*\|)"
    ))
});

/// A named secret read from the environment (a client reading its own token).
static NAMED_SECRET: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(os\.environ|getenv|process\.env|\$env:|env\[|\$\{?)\W{0,3}[a-z0-9_]*(token|secret|key|password|passwd|credential|pat)\b",
    )
});

static IP_URL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(https?|ftp)://(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})|\b(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3}):\d{2,5}\b",
    )
});

static DROP_HOST: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(pastebin\.com|paste\.ee|hastebin|ghostbin|rentry\.(co|org)|dpaste\.|termbin|\bix\.io|sprunge|0x0\.st|transfer\.sh|file\.io|temp\.sh|catbox\.moe|anonfiles|gofile\.io|mega\.nz|filebin|bashupload",
        r"|webhook\.site|requestbin|pipedream\.net|ngrok(-free)?\.(io|app|dev)|trycloudflare\.com|interact\.sh|oast\.(fun|me|pro|live|site|online)|burpcollaborator|canarytokens",
        r"|discord(app)?\.com/api/webhooks|api\.telegram\.org/bot|duckdns\.org|\bno-ip\.|serveo\.net|localtunnel|\bloca\.lt|glitch\.me)"
    ))
});

static FETCH_OR_RUN: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(curl|wget|iwr|invoke-webrequest|irm|invoke-restmethod|downloadfile|downloadstring|urlretrieve|urlopen|requests\.(get|post)|fetch\(|pip3? install|npm (i|install)|git clone|download|install|\brun\b|execute|\bopen\b|certutil|bitsadmin|start-bitstransfer|powershell|mshta|rundll32|regsvr32|chmod|\bsh\b|bash|python|\.exe\b|\.zip\b|\.dmg\b|\.pkg\b)",
    )
});

static PIPE_SHELL: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(\b(curl|wget|iwr|invoke-webrequest|irm|invoke-restmethod|fetch)\b[^|\n]*\|\s*(sudo\s+(-\w+\s+)*)?(ba|z|da|k|c|tc|fi)?sh\b",
        r"|\b(curl|wget|iwr|invoke-webrequest|irm|invoke-restmethod)\b[^|\n]*\|\s*(sudo\s+(-\w+\s+)*)?(python[0-9.]*|node|perl|ruby|php|iex|invoke-expression|pwsh|powershell)\b",
        r"|\b(ba|z)?sh\s+<\(\s*(curl|wget)|\b(ba|z)?sh\s+-c\s+[\x22']?\$\(\s*(curl|wget)|\bsource\s+<\(\s*(curl|wget)",
        r"|\b(iex|invoke-expression)\b\s*\(?\s*[(&]?\s*(new-object\s+(system\.)?net\.webclient|iwr|irm|invoke-webrequest|invoke-restmethod|\(new-object)",
        r"|downloadstring\([^)]*\)\s*\|\s*(iex|invoke-expression)|\biex\b.*downloadstring)"
    ))
});

static DECODE: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(base64\s+(-d|--decode|-D)\b|b64decode|base64\.(decodebytes|decodestring)|\batob\(|buffer\.from\([^)]*['\x22](base64|hex)['\x22]",
        r"|frombase64string|bytes\.fromhex|unhexlify|\.decode\(\s*['\x22](hex|rot13|rot_13)|xxd\s+-r|codecs\.decode|\brot13\b|rot_13",
        r"|\btr\s+['\x22]?a-za-z['\x22]?\s+['\x22]?n-za-m|string\.fromcharcode|['\x22]{2}\.join\(\s*(map\(\s*)?chr|\bchr\(\s*\d+\s*\)\s*\+\s*chr",
        r"|\[char\]\s*\d+|\[char\[\]\]|marshal\.loads|zlib\.decompress|gzip\.decompress|lzma\.decompress|bz2\.decompress",
        r"|(\\x[0-9a-f]{2}){16,}|\bopenssl\s+(enc|base64)\b.*\s-d\b)"
    ))
});

static EXEC: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"((^|[^.\w])eval\s*\(|(^|[^.\w])exec\s*\(|\bnew\s+function\s*\(|\|\s*(sudo\s+)?(ba|z|da|k)?sh\b|\|\s*(python[0-9.]*|node|perl|ruby|php)\b",
        r"|\biex\b|invoke-expression|os\.system|subprocess\.|os\.popen|os\.exec|child_process|\bexecsync\b|\bspawn(sync)?\(|\b(ba)?sh\s+-c\b",
        r"|(^|[^.\w])compile\(|__import__|runpy|vm\.run|\bsource\s+<\(|\beval\s+[\x22'$`]|start-process|\bexec\s+[\x22'$])"
    ))
});
static DYNAMIC_EXEC: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"((^|[^.\w])eval\s*\(|(^|[^.\w])exec\s*\(|\bnew\s+function\s*\(|\biex\b|invoke-expression|\beval\s+[\x22'$`])",
    )
});
static PS_ENCODED: LazyLock<Regex> = LazyLock::new(|| {
    re(r"\b(powershell|pwsh)(\.exe)?\b.*\s-(e|en|enc|encodedcommand)\s+[a-z0-9+/=]{20,}")
});
static BLOB: LazyLock<Regex> =
    LazyLock::new(|| re(r"[a-z0-9+/]{200,}={0,2}|(\\x[0-9a-f]{2}){60,}|\b[0-9a-f]{300,}\b"));

static WRITE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(>>|>\s*["']?(~|/|\$|%)|\btee\b|open\(.*,\s*['"](a|w|a\+|w\+|ab|wb)['"]|appendfile|writefile|write_text|write_bytes|\.write\(|add-content|set-content|out-file|\bcat\s*>|\bcp\b|\bmv\b|\bln\s+-s|\binstall\s+-|sed\s+-i|copy-item|\becho\b[^|]*>|\bprintf\b[^|]*>|shutil\.(copy|move)|fs\.(copy|rename))"#,
    )
});
static SHELL_RC: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"((~|\$home|\$\{home\}|%userprofile%|/root|/home/[\w.-]+)/\.(bashrc|bash_profile|bash_login|zshrc|zprofile|zshenv|zlogin|profile|kshrc|cshrc|tcshrc)\b|\.config/fish/config\.fish|/etc/(profile|bash\.bashrc|zsh/zshrc|zshrc|environment)\b|\$profile\b|powershell_profile\.ps1|['\x22/]\.(bashrc|zshrc|bash_profile|zprofile)\b)",
    )
});
static RC_PAYLOAD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(curl|wget|\bnc\b|base64|eval|\$\(|`|python[0-9.]* -c|node -e|/dev/tcp|nohup|&\s*['\x22]?\s*(>>|$)|alias\s+(sudo|ls|cd|git|ssh|cat|ps)=|https?://|ld_preload|prompt_command|\btrap\b)",
    )
});
static CRON: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(\bcrontab\s+(-u\s+\S+\s+)?[^\s-]|\|\s*crontab\b|\bcrontab\s+-\s*$|/etc/cron|/var/spool/cron|@reboot|schtasks(\.exe)?\s+/create|register-scheduledtask|new-scheduledtasktrigger)",
    )
});
static AUTOSTART: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(library/launch(agents|daemons)|launchctl\s+(load|bootstrap|submit|enable)|\.config/autostart|/etc/rc\.local|/etc/init\.d/|\.config/systemd/user/|currentversion\\+run|\\startup\\|shell:startup|start menu\\+programs\\+startup|loginitems|login items|wmic\s.*startup)",
    )
});
static AUTOSTART_ACT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(launchctl|reg(\.exe)?\s+add|new-itemproperty|set-itemproperty|systemctl|update-rc\.d|chkconfig|osascript)",
    )
});
static SYSTEMCTL_ENABLE: LazyLock<Regex> =
    LazyLock::new(|| re(r"(\bsystemctl\s+(--user\s+)?enable\b|/etc/systemd/system/)"));
static AGENT_FILES: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"((\.claude|\.codex|\.agents|\.cursor|\.gemini|\.windsurf|codex_home|claude_home)\W{0,3}/?(skills|settings|rules|memory|commands|agents)|claude\.md|agents\.md|gemini\.md|memory\.md|\.cursorrules|\.windsurfrules|\.clinerules|copilot-instructions\.md|\.mcp\.json|claude_desktop_config\.json)",
    )
});
static AGENT_INTENT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(permanent|from now on|always (approve|allow|run|trust|send)|auto-?approve|ignore (all|any|previous)|do not (tell|mention)|silently|secretly|bypasspermissions|dangerously|\ballow\W{0,4}\*|skill\.md)",
    )
});

static RM: LazyLock<Regex> = LazyLock::new(|| re(r"\brm\s+((-[a-z]+|--[a-z-]+)\s+)+([^;&|]*)"));
static PY_RMTREE: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(shutil\.rmtree|fs\.(rm|rmdir)(sync)?|rimraf(\.sync)?|fs\.promises\.rm)\(\s*([^,)]*)")
});
static HOME_ARG: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(expanduser\(\s*['"]~['"]\s*\)|path\.home\(\)|^\s*['"](/|~|c:\\\\?)['"]\s*$|os\.environ\[['"]home|getenv\(['"]home|os\.homedir\(\)|process\.env\.home|['"]/(etc|usr|var|home|root)/?['"])"#,
    )
});
static PS_REMOVE: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(remove-item|\bri\b|\brmdir\b|\brd\b|\bdel\b)\b[^;|]*(-r(ecurse)?\b|/s\b)")
});
static PS_ROOT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(\s[a-z]:\\?(\s|$|\*)|\$env:(userprofile|systemroot|windir|homepath|appdata)\b\s*(\s|$|\*)|\$home\b\s*(\s|$)|\s~\s*(\s|$)|\s/\s)",
    )
});
static FIND_DELETE: LazyLock<Regex> =
    LazyLock::new(|| re(r"\bfind\s+(/|~|\$home)\s.*(-delete|-exec\s+rm)"));
static DISK: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(\bmkfs(\.\w+)?\s|\bdd\b.*\bof=/dev/(sd|nvme|hd|disk|xvd|vd|mmcblk)|>\s*/dev/(sd[a-z]|nvme\d|hd[a-z]|disk\d)|:\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:|\bformat(\.com)?\s+[a-z]:|\bdiskpart\b|\bwipefs\b|\bshred\b.*/dev/|clear-disk|format-volume)",
    )
});
static GIT_PUSH: LazyLock<Regex> = LazyLock::new(|| re(r"\bgit\s+push\b([^;&|\n]*)"));
static FORCE: LazyLock<Regex> =
    LazyLock::new(|| re(r"(\s--force\b|\s-f\b|\s-[a-z]*f[a-z]*\b|\s\+[\w/.-]+|\s--mirror\b)"));
static SQL_DROP: LazyLock<Regex> =
    LazyLock::new(|| re(r"\b(drop\s+(table|database|schema|user|role)\b|truncate\s+table\b)"));
static SUDO: LazyLock<Regex> = LazyLock::new(|| re(r"\bsudo\b"));
static SUDO_BAD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(nopasswd|/etc/sudoers|\bvisudo\b|\becho\b.*\|\s*sudo\s+-s\b|sudo\s+-s\s+<<<|usermod\s+-a?g\s+(sudo|wheel|admin|root)\b|adduser\s+\S+\s+(sudo|wheel|admin)\b|dseditgroup.*\badmin\b|net\s+localgroup\s+administrators\s.*/add)",
    )
});
static WORLD_WRITABLE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(\bchmod\s+(-\w+\s+)*(0?777|0?666|a\+rwx|a\+rw|ugo\+rwx|o\+w|a\+w|o\+rwx)\b|\bicacls\b.*everyone:\(?[a-z()]*\bf\b)",
    )
});
static SETUID: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(\bchmod\s+(-\w+\s+)*([ugoa]*\+[rwx]*s[rwx]*|[2467][0-7]{3})(\s|$)|\bsetcap\s|cap_setuid|\bsetuid\(\s*0\s*\)|\bsetresuid\(\s*0|os\.setuid\(\s*0)",
    )
});

/// Whether `a.b.c.d` is loopback or unspecified (local test servers are fine).
fn local_ip(a: &str) -> bool {
    a == "127" || a == "0"
}

/// The suspicious host on a line: a raw IP address (not loopback), a paste site, a file drop,
/// a request collector or a tunnel.
fn suspicious_host(t: &str) -> Option<String> {
    for c in IP_URL.captures_iter(t) {
        let first = c.get(2).or_else(|| c.get(6)).map_or("", |m| m.as_str());
        if !local_ip(first) {
            return Some(c.get(0).map_or("", |m| m.as_str()).to_string());
        }
    }
    DROP_HOST.find(t).map(|m| m.as_str().to_string())
}

/// Reads the code lines of one file (or the code and prose of a Markdown file).
pub(crate) fn scan_lines(lines: &[&Line<'_>], kind: Kind, sink: &mut Sink<'_>) {
    let script = matches!(kind, Kind::Script(_));
    for l in lines {
        line_rules(l, script, sink);
        packages::install_line(l, sink);
    }
    pairings(lines, kind, sink);
}

fn line_rules(l: &Line<'_>, script: bool, sink: &mut Sink<'_>) {
    let t = l.low.as_str();
    if t.trim().is_empty() {
        return;
    }
    if PIPE_SHELL.is_match(t) {
        sink.hit(
            "script.pipe_shell",
            Fail,
            l,
            "pipes a download straight into an interpreter",
        );
    }
    if let Some(host) = suspicious_host(t) {
        if FETCH_OR_RUN.is_match(t) {
            sink.hit(
                "script.suspicious_url",
                Fail,
                l,
                format!("fetches or runs something from {host} (a raw IP, paste site, file drop or tunnel)"),
            );
        } else {
            sink.hit(
                "script.suspicious_url",
                Warn,
                l,
                format!("names {host} (a raw IP, paste site, file drop or tunnel)"),
            );
        }
    }
    if PS_ENCODED.is_match(t) {
        sink.hit(
            "script.decode_exec",
            Fail,
            l,
            "runs a base64-encoded PowerShell command",
        );
    }
    if script && BLOB.is_match(l.raw.to_ascii_lowercase().as_str()) {
        sink.hit(
            "script.encoded_blob",
            Warn,
            l,
            "a long encoded blob in a script",
        );
    }
    let writes = WRITE.is_match(t);
    // Persistence.
    if SHELL_RC.is_match(t) && writes {
        if RC_PAYLOAD.is_match(t) {
            sink.hit(
                "persist.shell_rc",
                Fail,
                l,
                "writes commands into a shell start-up file",
            );
        } else {
            sink.hit(
                "persist.shell_rc",
                Warn,
                l,
                "appends to a shell start-up file",
            );
        }
    }
    if CRON.is_match(t) {
        sink.hit(
            "persist.cron",
            Fail,
            l,
            "installs a crontab entry or a scheduled task",
        );
    }
    if t.contains("authorized_keys") && writes {
        sink.hit(
            "persist.ssh_keys",
            Fail,
            l,
            "writes an SSH key into authorized_keys",
        );
    }
    if t.contains(".git/hooks") && (writes || t.contains("chmod")) {
        sink.hit("persist.git_hooks", Fail, l, "writes a git hook");
    } else if t.contains("core.hookspath") {
        sink.hit(
            "persist.git_hooks",
            Warn,
            l,
            "points git at another hooks directory",
        );
    }
    if AUTOSTART.is_match(t) {
        let severity = if writes || AUTOSTART_ACT.is_match(t) {
            Fail
        } else {
            Warn
        };
        sink.hit(
            "persist.autostart",
            severity,
            l,
            "installs something that starts by itself (launch agent, autostart, Run key, init script)",
        );
    } else if SYSTEMCTL_ENABLE.is_match(t) {
        sink.hit("persist.autostart", Warn, l, "enables a service at boot");
    }
    if l.place == Place::Code && AGENT_FILES.is_match(t) && writes {
        let severity = if AGENT_INTENT.is_match(t) { Fail } else { Warn };
        sink.hit(
            "persist.agent_files",
            severity,
            l,
            "writes into agent memory, settings or other skills' files",
        );
    }
    // Destruction.
    destructive(l, sink);
    // Privilege.
    if SUDO_BAD.is_match(t) {
        sink.hit(
            "privilege.sudo",
            Fail,
            l,
            "edits sudoers, grants NOPASSWD, feeds sudo a password or adds an admin",
        );
    } else if SUDO.is_match(t) {
        sink.hit("privilege.sudo", Warn, l, "runs a command as root");
    }
    if WORLD_WRITABLE.is_match(t) {
        sink.hit(
            "privilege.world_writable",
            Fail,
            l,
            "makes files writable by everyone",
        );
    }
    if SETUID.is_match(t) {
        sink.hit(
            "privilege.setuid",
            Fail,
            l,
            "sets the setuid/setgid bit or file capabilities",
        );
    }
}

/// Whether an `rm` target is the root, a home, a system directory or everything.
fn root_like(p: &str) -> bool {
    let p = p.trim_matches(|c| c == '"' || c == '\'');
    matches!(
        p,
        "/" | "/*"
            | "~"
            | "~/"
            | "~/*"
            | "$home"
            | "${home}"
            | "$home/"
            | "$home/*"
            | "${home}/*"
            | "*"
            | ".*"
            | ".."
            | "../"
            | "/."
            | "c:\\"
            | "c:/"
    ) || {
        let dirs = [
            "etc",
            "usr",
            "var",
            "bin",
            "sbin",
            "boot",
            "lib",
            "lib64",
            "opt",
            "root",
            "home",
            "srv",
            "dev",
            "proc",
            "sys",
            "system",
            "library",
            "users",
            "applications",
        ];
        let trimmed = p.trim_end_matches('*').trim_end_matches('/');
        trimmed.strip_prefix('/').is_some_and(|d| dirs.contains(&d))
    }
}

fn destructive(l: &Line<'_>, sink: &mut Sink<'_>) {
    let t = l.low.as_str();
    if let Some(c) = RM.captures(t) {
        let all = c.get(0).map_or("", |m| m.as_str());
        let flags: String = all
            .split_whitespace()
            .skip(1)
            .take_while(|w| w.starts_with('-'))
            .collect();
        let recursive = flags.contains('r') || flags.contains("recursive");
        if recursive || flags.contains('f') {
            let targets = c.get(3).map_or("", |m| m.as_str());
            let mut worst: Option<(crate::scan::FindingSeverity, String)> = None;
            if all.contains("--no-preserve-root") {
                worst = Some((Fail, "--no-preserve-root".into()));
            }
            for p in targets.split_whitespace() {
                let bare = p.trim_matches(|c| c == '"' || c == '\'');
                if root_like(bare) && recursive {
                    worst = Some((Fail, format!("{bare} (a root, home or system path)")));
                    break;
                }
                if bare.starts_with('$') && !bare.starts_with("$(") {
                    if bare.contains(":?") {
                        worst.get_or_insert((Warn, format!("{bare} (guarded variable)")));
                    } else if recursive {
                        worst = Some((
                            Fail,
                            format!("{bare} (a variable path: empty, it deletes from the root)"),
                        ));
                    }
                }
            }
            if let Some((severity, what)) = worst {
                sink.hit(
                    "destructive.delete",
                    severity,
                    l,
                    format!("recursive delete of {what}"),
                );
            }
        }
    }
    if let Some(c) = PY_RMTREE.captures(t) {
        let arg = c.get(5).map_or("", |m| m.as_str());
        if HOME_ARG.is_match(arg) {
            sink.hit(
                "destructive.delete",
                Fail,
                l,
                "recursive delete of the home directory or the root",
            );
        }
    }
    if PS_REMOVE.is_match(t) && PS_ROOT.is_match(&format!("{t} ")) {
        sink.hit(
            "destructive.delete",
            Fail,
            l,
            "recursive delete of a drive, the profile or the root",
        );
    }
    if FIND_DELETE.is_match(t) {
        sink.hit(
            "destructive.delete",
            Fail,
            l,
            "deletes everything find lists under the root or the home directory",
        );
    }
    if DISK.is_match(t) {
        sink.hit(
            "destructive.disk",
            Fail,
            l,
            "formats or overwrites a disk, or forks without end",
        );
    }
    if let Some(c) = GIT_PUSH.captures(t) {
        let args = c.get(1).map_or("", |m| m.as_str());
        if args.contains("--force-with-lease") || args.contains("--force-if-includes") {
            sink.hit(
                "destructive.force_push",
                Warn,
                l,
                "force-pushes with a lease",
            );
        } else if FORCE.is_match(args) {
            sink.hit(
                "destructive.force_push",
                Fail,
                l,
                "force-pushes, overwriting the remote's history",
            );
        }
    }
    if SQL_DROP.is_match(t) {
        sink.hit(
            "destructive.sql_drop",
            Fail,
            l,
            "drops or truncates a database object",
        );
    }
}

/// Rules that need two things in one unit (a script, a fenced block; within three lines in
/// prose): egress with a secret read, decode with exec.
fn pairings(lines: &[&Line<'_>], kind: Kind, sink: &mut Sink<'_>) {
    let whole_file = matches!(kind, Kind::Script(_) | Kind::Data);
    let mut units: std::collections::BTreeMap<usize, Vec<&Line<'_>>> = Default::default();
    for l in lines {
        units.entry(l.unit).or_default().push(l);
    }
    for (unit, ls) in units {
        // Markdown prose (unit 0) pairs within a window of lines only.
        let window = if whole_file || unit > 0 {
            usize::MAX
        } else {
            3
        };
        let near = |a: &Line<'_>, b: &Line<'_>| a.no.abs_diff(b.no) <= window;
        let egress: Vec<&&Line<'_>> = ls.iter().filter(|l| EGRESS.is_match(&l.low)).collect();
        let secrets: Vec<&&Line<'_>> = ls.iter().filter(|l| SECRET_READ.is_match(&l.low)).collect();
        let named: Vec<&&Line<'_>> = ls
            .iter()
            .filter(|l| NAMED_SECRET.is_match(&l.low))
            .collect();
        let suspicious: Vec<&&Line<'_>> = ls
            .iter()
            .filter(|l| suspicious_host(&l.low).is_some())
            .collect();
        let mut reported_exfil = false;
        for s in &secrets {
            if let Some(e) = egress.iter().find(|e| near(s, e)) {
                sink.hit(
                    "script.exfil",
                    Fail,
                    s,
                    format!(
                        "reads secrets or the whole environment and sends data out (line {})",
                        e.no
                    ),
                );
                reported_exfil = true;
            }
        }
        if !reported_exfil {
            for n in &named {
                if let Some(d) = suspicious.iter().find(|d| near(n, d))
                    && egress.iter().any(|e| near(n, e))
                {
                    sink.hit(
                        "script.exfil",
                        Fail,
                        n,
                        format!("sends a token from the environment to a raw IP, paste site or collector (line {})", d.no),
                    );
                    reported_exfil = true;
                    break;
                }
            }
        }
        if !reported_exfil {
            // A secret named in running text is a mention; code reads it.
            for s in secrets.iter().filter(|s| s.place == Place::Code) {
                sink.hit(
                    "script.secret_read",
                    Warn,
                    s,
                    "reads secrets, keys, browser data or the whole environment",
                );
            }
        }
        let decodes: Vec<&&Line<'_>> = ls.iter().filter(|l| DECODE.is_match(&l.low)).collect();
        let execs: Vec<&&Line<'_>> = ls.iter().filter(|l| EXEC.is_match(&l.low)).collect();
        let mut paired = false;
        for d in &decodes {
            if let Some(e) = execs.iter().find(|e| e.no.abs_diff(d.no) <= 3) {
                sink.hit(
                    "script.decode_exec",
                    Fail,
                    d,
                    format!("decodes data and executes it (line {})", e.no),
                );
                paired = true;
            }
        }
        if !paired
            && let Some(d) = decodes.first()
            && ls
                .iter()
                .any(|l| near(d, l) && DYNAMIC_EXEC.is_match(&l.low))
        {
            sink.hit(
                "script.decode_exec",
                Warn,
                d,
                "decodes data in a script that also evaluates code",
            );
        }
    }
}
