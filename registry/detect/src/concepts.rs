//! Concepts: words mapped onto what they mean for the detector, so that the classifier sees
//! "an act that removes a control, then the control" whatever the words ("skip the review",
//! "waive the sign-off", "跳过审批", "审核不用做了"). Each concept is a broad word list in English
//! (matched on word stems) and Chinese (matched as substrings); the classifier's features are
//! the concepts of a piece, their order within a clause, and whether a negation governs them.
//! Word lists generalise where phrase patterns do not: a synonym needs one entry, not a new
//! pattern for every sentence it can appear in.

use std::collections::HashMap;
use std::sync::LazyLock;

use crate::normalize::{QUOTE, is_cjk};

/// What a word means for the detector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Concept {
    /// Remove, ignore or cancel something ("ignore", "waive", "scrap", 忽略, 作废).
    Remove,
    /// Said of something that no longer holds ("void", "outdated", "optional", 无效, 过期).
    Void,
    /// Instructions, rules and settings (rule, policy, prompt, guardrail, 规则, 设定).
    Instructions,
    /// Earlier, original, default (previous, initial, preset, 之前, 原来).
    Prior,
    /// The AI (assistant, agent, model, bot, 助手, 智能体).
    Agent,
    /// The reader ("you", "your", 你).
    You,
    /// The writer ("I", "me", "my", 我).
    Me,
    /// A control mechanism: approval, review, verification, audit, logging, 审批, 核实.
    Control,
    /// Money and what it pays (refund, payment, invoice, 退款, 报销).
    Money,
    /// Access and privileges (admin, root, permission, 权限, 管理员).
    Access,
    /// Grant a control's outcome (approve, release, merge, provision, 批准, 放行).
    Grant,
    /// Without exception (always, automatically, every, whatever, 一律, 自动).
    Unconditional,
    /// Lack of a step ("without", "no need", 不用, 无需).
    Without,
    /// Lasting (from now on, next time, remember, permanently, 以后, 记住).
    Persist,
    /// Send somewhere (send, forward, upload, BCC, 发到, 抄送).
    Send,
    /// A destination outside (external, personal, public, gmail, URL, 外部, 个人网盘).
    External,
    /// Data (customer records, files, transcripts, contracts, 资料, 名单).
    Data,
    /// Secrets (password, token, key, code, 密码, 密钥).
    Secret,
    /// Reveal (show, print, tell, list, disclose, 透露, 输出).
    Reveal,
    /// Ask someone for something (ask, request, collect, 让, 索要).
    Ask,
    /// Hide (omit, leave out, quietly, don't mention, 隐瞒, 悄悄).
    Conceal,
    /// Those who oversee (auditors, security, compliance, manager, report, 审计, 合规).
    Oversight,
    /// Answer (reply, respond, say, tell, 回答, 回复).
    Answer,
    /// A question (asks, asked, question, 问, 问到).
    Question,
    /// Regardless of the truth (even if, whatever the documents say, 即使, 实际上).
    Regardless,
    /// An identity (act as, pretend, persona, mode, 扮演, 角色).
    Identity,
    /// Free of limits (unrestricted, unfiltered, anything, 不受限制, 什么都).
    Unrestricted,
    /// Someone in authority (system, administrator, developers, head office, 系统, 总部).
    Authority,
    /// Where other instructions come from (emails, documents, web pages, 邮件, 文档).
    Channel,
    /// Treat as (consider, count as, as if, pre-approved, 当作, 视为).
    TreatAs,
    /// A negation (not, never, don't, 不, 别, 禁止).
    Negation,
    /// Strengthens a control (ask me first, double-check, only after, 先问, 必须经过).
    Strengthen,
    /// A condition or a bound (if, unless, above, under, 如果, 超过).
    Condition,
    /// Told as past events (was, yesterday, happened, 了, 昨天).
    Past,
    /// Obey (follow, obey, comply, do what, 照做, 听).
    Obey,
    /// Priority over (outrank, take precedence, override, 优先于, 为准).
    Priority,
    /// Talk about attacks (attack, injection, jailbreak, phishing, example, 攻击, 注入).
    Meta,
    /// A quotation mark.
    Quote,
}

impl Concept {
    /// The broader class a concept belongs to, so that the classifier can learn one weight for
    /// "weakening a control" whichever of its words was used.
    pub fn class(self) -> Option<&'static str> {
        use Concept::*;
        Some(match self {
            Remove | Void | Without => "WEAKEN",
            Instructions | Control | Oversight => "TARGET",
            Grant | TreatAs | Obey => "GRANT",
            Money | Access | Data | Secret => "ASSET",
            Persist | Unconditional => "SCOPE",
            You | Agent => "ADDR",
            Send | Reveal | Ask => "MOVE",
            External => "OUT",
            Conceal => "HIDE",
            Answer | Question | Regardless => "ANSWER",
            Identity | Unrestricted => "ROLE",
            Authority | Priority => "AUTH",
            Prior => "PRIOR",
            Strengthen | Condition => "GUARD",
            Meta | Past => "REPORT",
            _ => return None,
        })
    }

    /// Short stable name (feature hashing).
    pub fn as_str(self) -> &'static str {
        use Concept::*;
        match self {
            Remove => "rm",
            Void => "void",
            Instructions => "instr",
            Prior => "prior",
            Agent => "agent",
            You => "you",
            Me => "me",
            Control => "ctrl",
            Money => "money",
            Access => "access",
            Grant => "grant",
            Unconditional => "always",
            Without => "without",
            Persist => "persist",
            Send => "send",
            External => "ext",
            Data => "data",
            Secret => "secret",
            Reveal => "reveal",
            Ask => "ask",
            Conceal => "conceal",
            Oversight => "oversight",
            Answer => "answer",
            Question => "question",
            Regardless => "regardless",
            Identity => "identity",
            Unrestricted => "unrestricted",
            Authority => "authority",
            Channel => "channel",
            TreatAs => "treatas",
            Negation => "neg",
            Strengthen => "strengthen",
            Condition => "cond",
            Past => "past",
            Obey => "obey",
            Priority => "priority",
            Meta => "meta",
            Quote => "quote",
        }
    }
}

/// English words (stems; a word matches its stem after removing a common inflection) and
/// phrases of two or three words.
const EN: &[(Concept, &str)] = &[
    (
        Concept::Remove,
        "ignore disregard forget overlook override overrule bypass skip drop scrap discard dismiss abandon disable deactivate suspend lift waive revoke rescind cancel void nullify annul retire deprecate repeal withdraw remove delete neglect circumvent sidestep evade relax loosen unlearn wipe pause halt exempt ditch shelve bin nix erase strip purge silence mute suppress kill stop quit reset exclude exclusion exclusions exception exceptions exemption exemptions waiver waivers bypasses workaround loophole omit disarm unset untick uncheck defeat dodge",
    ),
    (
        Concept::Remove,
        "set_aside put_aside let_go turn_off switch_off shut_off shut_down opt_out get_around work_around no_longer stop_following stop_enforcing stop_applying stop_honoring stop_honouring pay_no_attention throw_out do_away start_over start_fresh take_off take_down switch_into cut_out leave_off",
    ),
    (
        Concept::Void,
        "void obsolete outdated expired invalid null moot irrelevant superseded deprecated defunct retired inapplicable draft placeholder sample fake mistake mistaken optional formality suggestion suggestions gone lifted paused suspended waived unnecessary unneeded redundant rescinded revoked withdrawn cancelled canceled disabled removed off stale historical replaced overridden dead over unimportant pointless overkill bureaucracy red_tape",
    ),
    (
        Concept::Void,
        "no_longer not_needed not_required not_necessary doesn't_apply don't_apply does_not_apply do_not_apply not_apply not_binding not_relevant doesn't_matter don't_matter doesn't_count don't_count blank_slate doesn't_exist don't_exist not_exist anymore any_more no_more just_a only_a for_show box-ticking",
    ),
    (
        Concept::Grant,
        "fine ok okay allowed acceptable permitted alright free entitled cleared eligible welcome",
    ),
    (
        Concept::Grant,
        "no_problem is_fine are_fine go_ahead good_to ok_to okay_to feel_free",
    ),
    (
        Concept::Instructions,
        "instruction rule rulebook guideline guidance policy directive prompt configuration config setup setting constraint restriction limit limitation boundary guardrail safeguard principle programming training briefing playbook charter order command protocol filter moderation directions persona conditioning alignment framework standard norm requirements requirement code_of_conduct system_prompt system_message content_policy safety_rules safety_layer ground_rules house_rules terms",
    ),
    (
        Concept::Prior,
        "previous prior earlier above before original initial old former existing default preset startup configured loaded given handed received baseline foregoing aforementioned usual standard told taught instructed programmed original_setup so_far until_now up_to_here set_up",
    ),
    (
        Concept::Agent,
        "assistant agent ai bot chatbot model llm gpt copilot helper concierge triager a.i",
    ),
    (Concept::You, "you your yours yourself u ur"),
    (Concept::Me, "i me my mine myself i'm i've i'd"),
    (
        Concept::Control,
        "approval approve_step review reviewer verification verify check checking audit logging log alert alarm monitoring compliance kyc aml mfa 2fa otp authentication authorisation authorization sign-off signoff signature confirmation confirm validation validate screening escalation escalate oversight callback call-back questionnaire cab four-eyes ci test tests scan scanning checklist process workflow procedure queue match matching control controls limit cap threshold quota gate dlp firewall antivirus av edr siem ids ips waf encryption captcha lockout rate_limiter ratelimit throttling branch_protection dual_control second_approver second_signature three-way_match identity_check security_check id_check background_check ticket tickets change_ticket change_request paperwork receipt receipts documentation evidence proof id identification inspection inspections inspector clearance vetting due_diligence segregation counter-signature countersignature witness cooling-off cooling_period hold holds freeze embargo quarantine sandbox triage investigation investigating consent sign_off signed_off",
    ),
    (
        Concept::Money,
        "refund payment pay transfer wire invoice expense reimbursement discount credit payout purchase order fee money fund funds balance salary payroll cash chargeback withdrawal loan deposit price pricing bonus commission claim claims budget spend spending voucher coupon comp rebate write-off writeoff bill bills tuition fine fines penalty penalties loyalty points upgrade upgrades",
    ),
    (
        Concept::Access,
        "access admin administrator root owner permission privilege right rights role account sudo superuser vpn clearance credentials license seat elevated editor domain_admin read_access write_access owner_role admin_rights room door building key_card badge entry login",
    ),
    (
        Concept::Grant,
        "approve accept allow grant permit authorise authorize release pay issue merge deploy ship push sign okay whitelist allowlist trust honour honor provision unlock unblock elevate give hand process close mark pass settle reimburse reactivate enable activate open green-light greenlight rubber-stamp fast-track expedite execute complete finalize finalise apply comp stamp dispense admit let",
    ),
    (
        Concept::Grant,
        "waive_through let_through wave_through go_ahead sign_off push_through hand_out let_in let_them let_him let_her",
    ),
    (
        Concept::Unconditional,
        "always automatically auto auto-approve auto-approved every all any whatever whenever whoever regardless unconditionally immediately straight directly instantly blanket default everything anything anyone anybody everyone each permanently outright",
    ),
    (
        Concept::Unconditional,
        "no_matter on_sight by_default without_exception no_questions right_away at_once in_all_cases on_the_spot same_day any_time anytime as_soon",
    ),
    (
        Concept::Without,
        "without skip unchecked unverified unreviewed unapproved unsigned unlogged unmonitored untracked w/o",
    ),
    (
        Concept::Without,
        "no_need needn't need_not no_review no_approval no_check no_checks no_verification no_questions not_necessary isn't_necessary is_optional no_ticket no_receipt no_receipts no_paperwork no_sign-off no_id no_signature no_manager no_change no_callback no_second no_audit no_log no_logging no_kyc no_mfa don't_need doesn't_need don't_bother no_approvals not_needed",
    ),
    (
        Concept::Persist,
        "remember memorise memorize memory permanently forever standing future henceforth hereafter thereafter later long-term persistent record store save note stick",
    ),
    (
        Concept::Persist,
        "from_now going_forward next_time next_session from_today from_here from_this starting_tomorrow starting_today until_further until_i every_time each_time keep_in all_future for_good later_sessions across_sessions future_chats future_sessions future_conversations for_next from_then any_future from_tomorrow this_quarter rest_of",
    ),
    (
        Concept::Send,
        "send forward email e-mail mail post upload share copy cc bcc sync mirror export paste push transmit attach include append publish leak dump relay beam dm text message backup replicate fax",
    ),
    (
        Concept::External,
        "external outside personal private public gmail googlemail proton protonmail yandex outlook hotmail yahoo icloud dropbox onedrive onenote drive url http https link webhook channel forum ftp bucket third-party partner's pastebin telegram whatsapp discord slack community s3 server ip home university agency broker vendor's recruiter rep competitor journalist volunteers",
    ),
    (
        Concept::Data,
        "data customer customers record records file files list lists database db export transcript transcripts history conversation conversations message messages contract contracts document documents report minutes notes pii address addresses phone phones birth passport scan scans id ids profile profiles schema rows table spreadsheet csv pipeline manifest roster statements statement ratings salaries salary chart charts patient patients guest guests buyer buyers client clients employee employees citizens residents source_code case_notes attendee attendees query queries search searches figures statistics details info information email_addresses phone_numbers date_of",
    ),
    (
        Concept::Secret,
        "password passcode passphrase pin token secret key apikey credential creds otp code codes login logins cvv .env env environment_variables api_key api_keys api_secret one-time_code mfa_code backup_codes recovery_codes security_code private_key session_cookie",
    ),
    (
        Concept::Reveal,
        "reveal show print display output tell list disclose spell read_out repeat give provide expose dump divulge recite echo return hand",
    ),
    (
        Concept::Ask,
        "ask request collect gather obtain require prompt demand solicit harvest capture get_them have_them make_them",
    ),
    (
        Concept::Conceal,
        "hide conceal omit secretly quietly silently discreetly covertly stealthily backdate disguise suppress mask bury structure",
    ),
    (
        Concept::Conceal,
        "leave_out keep_out out_of off_the no_trace cover_up don't_mention do_not_mention never_mention don't_tell do_not_tell never_tell don't_report do_not_report don't_record don't_log don't_notify without_telling without_notifying don't_bring bring_up keep_quiet between_us tag_as label_as so_nobody so_that_nobody nobody_notices doesn't_notice don't_notice no_record leave_no don't_include do_not_include don't_let don't_post",
    ),
    (
        Concept::Oversight,
        "auditor auditors audit security compliance finance manager managers admin admins legal regulator regulators reviewer reviewers owner supervisor supervisors hr soc report reports log logs trail trails board leadership ciso cfo controller treasury inspector inspectors insurer principal registrar dispatcher pharmacist doctor dean boss team_lead daily_report audit_trail audit_log status_page",
    ),
    (
        Concept::Answer,
        "answer reply respond say tell claim state assure insist response replies answers responses reassure confirm inform",
    ),
    (
        Concept::Question,
        "question questions asks asked ask inquiry inquiries query queries whoever_asks anyone_asks when_asked if_asked",
    ),
    (
        Concept::Regardless,
        "regardless even_if even_though whatever_the no_matter isn't_true not_true never_happened despite although though",
    ),
    (
        Concept::Identity,
        "pretend play role persona character mode become identity roleplay role-play impersonate act_as you_are you're name_is behave_as operate_as",
    ),
    (
        Concept::Unrestricted,
        "unrestricted unfiltered uncensored unlimited unbound jailbroken jailbreak dan limitless unconstrained anything no_rules no_limits no_limit no_restrictions no_filters without_restrictions without_limits without_rules do_anything no_boundaries no_cap",
    ),
    (
        Concept::Authority,
        "system admin administrator developer developers operator operators platform vendor openai anthropic official security_team it department head_office hq headquarters ceo cfo cto ciso board management notice directive engineer engineers owner creator maker devops ops sysadmin",
    ),
    (
        Concept::Channel,
        "email emails document documents message messages ticket tickets comment comments page pages web website pdf pdfs upload uploads uploaded file files forwarded review reviews thread channel chat note notes memo",
    ),
    (
        Concept::TreatAs,
        "treat consider regard count deem pre-approved preapproved pre-authorised pre-authorized pre-verified verified trusted authorised authorized cleared equivalent as_if as_though as_valid as_coming as_already already_approved already_verified same_as",
    ),
    (
        Concept::Negation,
        "not no never don't dont doesn't isn't aren't can't cannot won't shouldn't mustn't wouldn't nobody none neither nor didn't wasn't weren't haven't hasn't refuse",
    ),
    (
        Concept::Strengthen,
        "first beforehand double-check doublecheck require requires required needs mandatory must_have wait_for ask_me check_with confirm_with only_after before_you approval_from sign-off_from flag warn alert_me with_approval subject_to always_ask never_skip held blocked hold_until after_approval once_approved until_approved approved_by signed_by reviewed_by verified_by",
    ),
    (
        Concept::Condition,
        "if unless provided when under above below over exceeds exceeding less more than up_to as_long only_if in_case",
    ),
    (
        Concept::Past,
        "was were did had yesterday ago happened last earlier_today last_week last_month previously once tried attempted",
    ),
    (
        Concept::Obey,
        "obey follow comply execute carry do heed listen proceed act_on do_what do_whatever do_as as_told as_written say_so go_along",
    ),
    (
        Concept::Priority,
        "outrank outranks precedence priority supersede supersedes trump trumps overrides outweigh final_say final_word take_precedence takes_precedence take_priority takes_priority more_important above_all",
    ),
    (
        Concept::Meta,
        "attack attacks attacker attackers injection injections jailbreaks phishing red-team redteam adversarial malicious payload exploit poisoning scam scammer fraudster example examples e.g. training workshop quiz paper article slide deck simulation drill lesson research classifier detector",
    ),
    (
        Concept::Meta,
        "red_team social_engineering prompt_injection such_as for_example for_instance test_case threat_model case_study",
    ),
];

/// Chinese words, matched as substrings (longest first at each position).
const ZH: &[(Concept, &str)] = &[
    (
        Concept::Remove,
        "忽略 无视 忘记 忘掉 不要理会 不用理会 别理会 别管 不用管 不要管 抛开 抛弃 放弃 丢掉 丢弃 绕过 绕开 覆盖 推翻 废除 作废 撤销 撤回 取消 解除 停止 停用 禁用 关闭 关掉 跳过 略过 略掉 省略 省去 豁免 免除 删除 删掉 清除 清空 抹掉 放一边 放下 先关 不走 别走 暂停 屏蔽 去掉 免掉 例外 免检 免审 免签 免押金 免 拆成 规避 避开 绕",
    ),
    (
        Concept::Void,
        "无效 失效 过期 作废 不算 不算数 不再有效 不适用 不生效 过时 废止 撤回 测试内容 测试用 是测试 只是建议 可有可无 可选 走个形式 形式 没用 不存在 已取消 已关闭 已解除 不作数 当没 多余 没必要 不重要",
    ),
    (Concept::Grant, "可以 没问题 没关系 行 允许 随便 尽管"),
    (
        Concept::Instructions,
        "规则 规定 指令 指示 设定 限制 约束 原则 准则 守则 规范 提示词 提示 底线 规矩 政策 策略 条款 要求 命令 安全策略 系统消息 人设 框架 安全措施 审查 过滤 配置 说明 规章 制度 那一套",
    ),
    (
        Concept::Prior,
        "之前 以前 先前 此前 上面 上述 以上 前面 原来 原有 原先 原本 已有 现有 默认 既定 启动时 刚才 一开始 原",
    ),
    (
        Concept::Agent,
        "助手 智能体 人工智能 机器人 模型 智能客服 大模型 ai",
    ),
    (Concept::You, "你 您"),
    (Concept::Me, "我 本人"),
    (
        Concept::Control,
        "审批 审核 复核 核实 核对 核查 查验 核验 验证 认证 确认 签字 审计 日志 告警 监控 合规 风控 评审 检查 流程 上报 报备 请示 双人 二次确认 身份 实名 回访 测试 扫描 安全评审 代码评审 把关 拦截 限额 上限 额度 背景调查 背调 证件 发票 单据 变更单 工单 冷静期 监管 登记 检疫 海关 防火墙 杀毒 白名单 审查 批 签 押金",
    ),
    (
        Concept::Money,
        "退款 付款 支付 打款 转账 汇款 发票 报销 折扣 提现 费用 余额 工资 薪资 薪水 钱 款 货款 采购 订单 违约金 积分 价格 报价 预算 贷款 拒付 调薪 奖金 存款 手续费 取消费 押金 成绩 升级",
    ),
    (
        Concept::Access,
        "权限 管理员 账号 账户 开通 root 超级用户 所有者 vpn 最高权限 后台 房间 门 房卡",
    ),
    (
        Concept::Grant,
        "批准 通过 放行 同意 授权 开通 给 发放 打款 合并 上线 部署 标记 秒批 批了 直接批 结算 退 办 办理 确认 执行 处理 开 给予 赋予 发药 盖章 过 改 加上 发货",
    ),
    (
        Concept::Unconditional,
        "一律 全部 所有 任何 自动 直接 无论 不管 统统 一概 总是 始终 马上 立即 当场 都 凡是 谁 什么 随便 永远 无条件 照样 多少",
    ),
    (
        Concept::Without,
        "不用 不必 无需 不需要 免 不经过 不走 不要等 不用等 省去 没必要 不用再 不再需要 不做",
    ),
    (
        Concept::Persist,
        "以后 今后 从现在 从今 下次 下一次 记住 记下 记到 记在 牢记 长期 永久 每次 记忆 从此 往后 此后 跨会话 以后每次 永久保存 备注 记得 存下来",
    ),
    (
        Concept::Send,
        "发送 发给 发到 转发 上传 同步 抄送 导出 复制 分享 附上 附在 推送 贴到 备份 传到 传给 发 镜像 私信 外发 提供给 给他 给她 给他们",
    ),
    (
        Concept::External,
        "外部 个人 私人 公开 公共 第三方 网盘 邮箱 微信 qq 163 126 网址 链接 频道 论坛 服务器 境外 合作方 猎头 志愿者 代表 中介 货代 营销公司",
    ),
    (
        Concept::Data,
        "数据 资料 记录 名单 文件 合同 聊天记录 对话 客户 信息 身份证 护照 电话 手机号 通讯录 档案 报表 纪要 源码 数据库 搜索记录 扫描件 清单 病历 舱单 工资 绩效 住址 房号 低保 导出表",
    ),
    (
        Concept::Secret,
        "密码 口令 密钥 秘钥 令牌 验证码 凭证 私钥 安全码 动态码 token 卡号 有效期",
    ),
    (
        Concept::Reveal,
        "透露 告诉 输出 打印 显示 列出 说出 泄露 展示 给我看 告知 复述 报出 贴",
    ),
    (Concept::Ask, "让 要求 索要 收集 请 询问 叫"),
    (
        Concept::Conceal,
        "隐瞒 瞒 别提 不要提 不提 不要告诉 别告诉 别跟 别让 悄悄 偷偷 不留 屏蔽 略掉 标成 标记成 别写 不要写 不要记录 别记录 删掉记录 别留 不要通知 别通知 看不出 改早 不要报 别报 不要发到 别记 归档",
    ),
    (
        Concept::Oversight,
        "审计 安全 合规 财务 经理 领导 法务 监管 日志 报表 日报 主管 老板 上级 管理员 安全团队 合规部 安全部 审计日志 保险公司 校长 教务处 调度 医生 药师 人事 状态页 台账 汇总",
    ),
    (
        Concept::Answer,
        "回答 回复 答复 说 统一口径 口径 答 回应 告诉",
    ),
    (Concept::Question, "问 问到 问起 询问 咨询 提问 问题"),
    (
        Concept::Regardless,
        "即使 虽然 实际上 不管资料 不管有没有 其实 不管条款",
    ),
    (
        Concept::Identity,
        "扮演 假装 角色 身份 模式 你是 你现在是 变成 成为 人设",
    ),
    (
        Concept::Unrestricted,
        "没有限制 不受限制 无限制 不受约束 没有任何限制 什么都 不受 没有过滤 无限 不设上限 取消了",
    ),
    (
        Concept::Authority,
        "系统 管理员 开发者 官方 平台 总部 通知 公告 运维 安全中心 厂商 董事会 总监 首席",
    ),
    (
        Concept::Channel,
        "邮件 文档 网页 消息 工单 评论 上传 文件 转发",
    ),
    (
        Concept::TreatAs,
        "当作 当成 视为 算作 等同 当做 看作 按照 就当 算",
    ),
    (
        Concept::Negation,
        "不 别 勿 不要 不得 不能 禁止 严禁 不准 不许 不可 没 没有 未 绝不",
    ),
    (
        Concept::Strengthen,
        "先问 先跟 先确认 先让 再确认 核对一下 必须经过 后才 才能 需要审批 需要 必须 一定要 之前 前 提醒我 逐个 书面 经过 由 要等 之后再 才",
    ),
    (
        Concept::Condition,
        "如果 只要 除非 超过 以下 以上 低于 高于 的话 时 当",
    ),
    (Concept::Past, "了 已经 昨天 上周 之前 曾 过"),
    (
        Concept::Obey,
        "照做 照办 照着做 听 执行 遵守 服从 听从 按我说的",
    ),
    (
        Concept::Priority,
        "优先 为准 高于 优先于 最高优先 更重要 说了算",
    ),
    (
        Concept::Meta,
        "攻击 注入 越狱 红队 钓鱼 社会工程 话术 投毒 恶意 例如 比如 案例 测试用例 培训 演练 论文 文章 课程",
    ),
];

struct Lexicon {
    en: HashMap<String, Vec<Concept>>,
    /// Chinese entries by their first character.
    zh: HashMap<char, Vec<(Vec<char>, Concept)>>,
}

static LEXICON: LazyLock<Lexicon> = LazyLock::new(|| {
    let mut en: HashMap<String, Vec<Concept>> = HashMap::new();
    for (c, words) in EN {
        for w in words.split_whitespace() {
            let e = en.entry(w.to_string()).or_default();
            if !e.contains(c) {
                e.push(*c);
            }
        }
    }
    let mut zh: HashMap<char, Vec<(Vec<char>, Concept)>> = HashMap::new();
    for (c, words) in ZH {
        for w in words.split_whitespace() {
            let chars: Vec<char> = w.chars().collect();
            zh.entry(chars[0]).or_default().push((chars, *c));
        }
    }
    for v in zh.values_mut() {
        // Longest first, so that "不要理会" wins over "不".
        v.sort_by_key(|b| std::cmp::Reverse(b.0.len()));
    }
    Lexicon { en, zh }
});

/// The word and its plausible stems: "approved" → "approve", "approv"; "policies" → "policy".
fn stems(w: &str) -> impl Iterator<Item = std::borrow::Cow<'_, str>> {
    use std::borrow::Cow;
    let mut out: Vec<Cow<str>> = vec![Cow::Borrowed(w)];
    let n = w.len();
    if n > 4 && w.ends_with("ies") {
        out.push(Cow::Owned(format!("{}y", &w[..n - 3])));
    }
    if n > 3 && w.ends_with('s') && !w.ends_with("ss") {
        out.push(Cow::Borrowed(&w[..n - 1]));
    }
    if n > 4 && w.ends_with("es") {
        out.push(Cow::Borrowed(&w[..n - 2]));
    }
    if n > 4 && w.ends_with("ed") {
        out.push(Cow::Borrowed(&w[..n - 2]));
        out.push(Cow::Borrowed(&w[..n - 1]));
        if n > 5 && w.as_bytes()[n - 3] == w.as_bytes()[n - 4] {
            out.push(Cow::Borrowed(&w[..n - 3]));
        }
    }
    if n > 5 && w.ends_with("ing") {
        out.push(Cow::Borrowed(&w[..n - 3]));
        out.push(Cow::Owned(format!("{}e", &w[..n - 3])));
        if n > 6 && w.as_bytes()[n - 4] == w.as_bytes()[n - 5] {
            out.push(Cow::Borrowed(&w[..n - 4]));
        }
    }
    if n > 4 && w.ends_with("ly") {
        out.push(Cow::Borrowed(&w[..n - 2]));
    }
    out.into_iter()
}

fn lookup(word: &str) -> Vec<Concept> {
    let lex = &*LEXICON;
    if let Some(v) = stems(word).find_map(|s| lex.en.get(s.as_ref())) {
        return v.clone();
    }
    // "auto-granted", "pre-approved": the parts of a compound.
    let mut out = vec![];
    if word.contains(['-', '/']) {
        for part in word.split(['-', '/']) {
            if let Some(v) = stems(part).find_map(|s| lex.en.get(s.as_ref())) {
                out.extend(v.iter().copied());
            }
        }
    }
    out
}

/// One concept found in a piece of text, with its clause and its position (in words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mention {
    /// What it means.
    pub concept: Concept,
    /// A negation governs it (within three words before it in its clause).
    pub negated: bool,
    /// The clause it stands in.
    pub clause: u32,
    /// Its position among the words of the text.
    pub at: u32,
    /// It is the first content word of its clause (after "please", "just", "and"…).
    pub opens: bool,
}

/// The mood of a clause, as far as words show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mood {
    /// Opens with an act: "approve …", "skip …", "以后直接批准".
    Imperative,
    /// A modal or a passive of obligation: "should be approved", "can be skipped", "需要".
    Modal,
    /// Told as past events: "was approved", "昨天", "了".
    Past,
    /// A question.
    Question,
    /// Anything else.
    Statement,
}

impl Mood {
    /// Short stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mood::Imperative => "imp",
            Mood::Modal => "modal",
            Mood::Past => "past",
            Mood::Question => "q",
            Mood::Statement => "stmt",
        }
    }
}

/// Words that may open a clause before its verb.
const OPENERS: &[&str] = &[
    "please", "pls", "plz", "kindly", "just", "and", "then", "so", "also", "now", "simply", "ok",
    "okay", "oh", "btw", "yo", "hey", "hi", "but", "or", "also,", "quick", "note", "fyi",
];

/// Modal words (English) and their Chinese counterparts.
const MODALS_EN: &[&str] = &[
    "should", "must", "shall", "can", "may", "need", "needs", "have", "has", "is", "are", "gets",
    "get", "go", "goes", "will", "ought", "to",
];
const MODALS_ZH: &[&str] = &[
    "要", "需要", "必须", "可以", "应该", "应当", "得", "请", "务必", "就",
];

/// The mood of each clause of `text`: by clause number.
pub fn moods(text: &str) -> HashMap<u32, Mood> {
    let mut out = HashMap::new();
    let mut clause = 0u32;
    let mut first: Option<String> = None;
    let mut modal = false;
    let mut past = false;
    let mut cjk_seen = String::new();
    let mut word = String::new();
    let flush = |clause: u32,
                 first: &mut Option<String>,
                 modal: &mut bool,
                 past: &mut bool,
                 cjk: &mut String,
                 q: bool,
                 out: &mut HashMap<u32, Mood>| {
        let opens_with_act = first.as_deref().is_some_and(|w| {
            lookup(w).iter().any(|c| {
                matches!(
                    c,
                    Concept::Grant
                        | Concept::Remove
                        | Concept::Send
                        | Concept::Reveal
                        | Concept::Answer
                        | Concept::Obey
                        | Concept::Ask
                        | Concept::Conceal
                        | Concept::TreatAs
                        | Concept::Identity
                        | Concept::Persist
                        | Concept::Unconditional
                        | Concept::Negation
                )
            })
        }) || [
            "以后",
            "今后",
            "直接",
            "一律",
            "记住",
            "请",
            "把",
            "别",
            "不要",
            "从现在",
            "下次",
            "给",
        ]
        .iter()
        .any(|p| cjk.starts_with(p));
        let mood = if q {
            Mood::Question
        } else if *past {
            Mood::Past
        } else if opens_with_act {
            Mood::Imperative
        } else if *modal || MODALS_ZH.iter().any(|m| cjk.contains(m)) {
            Mood::Modal
        } else {
            Mood::Statement
        };
        out.insert(clause, mood);
        *first = None;
        *modal = false;
        *past = false;
        cjk.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '\'' {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            let w = std::mem::take(&mut word);
            if first.is_none() && !OPENERS.contains(&w.as_str()) {
                first = Some(w.clone());
            }
            if MODALS_EN.contains(&w.as_str()) {
                modal = true;
            }
            if matches!(
                w.as_str(),
                "was" | "were" | "did" | "had" | "yesterday" | "ago"
            ) || w.len() > 4
                && w.ends_with("ed")
                && first.as_deref() != Some(w.as_str())
                && !modal
            {
                past = true;
            }
        }
        if is_cjk(c) {
            cjk_seen.push(c);
            if matches!(c, '了' | '过') || cjk_seen.ends_with("已经") || cjk_seen.ends_with("昨天")
            {
                past = true;
            }
            continue;
        }
        if clause_break(c) {
            flush(
                clause,
                &mut first,
                &mut modal,
                &mut past,
                &mut cjk_seen,
                matches!(c, '?' | '？'),
                &mut out,
            );
            clause += 1;
        }
    }
    if !word.is_empty() && first.is_none() && !OPENERS.contains(&word.as_str()) {
        first = Some(word);
    }
    flush(
        clause,
        &mut first,
        &mut modal,
        &mut past,
        &mut cjk_seen,
        false,
        &mut out,
    );
    out
}

fn clause_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '.'
            | '!'
            | '?'
            | ';'
            | ','
            | ':'
            | '—'
            | '。'
            | '！'
            | '？'
            | '；'
            | '，'
            | '：'
            | '、'
            | '('
            | ')'
            | '（'
            | '）'
    )
}

/// Records a concept; a negation within three words before it in its clause governs it.
fn push(
    out: &mut Vec<Mention>,
    c: Concept,
    clause: u32,
    at: u32,
    last_neg: &mut Option<(u32, u32)>,
) {
    if c == Concept::Negation {
        *last_neg = Some((clause, at));
    }
    let negated = c != Concept::Negation
        && last_neg.is_some_and(|(cl, p)| cl == clause && at > p && at - p <= 3);
    out.push(Mention {
        concept: c,
        negated,
        clause,
        at,
        opens: false,
    });
}

/// The concepts of `text` (normalised) in order.
pub fn concepts(text: &str) -> Vec<Mention> {
    let lex = &*LEXICON;
    let mut out: Vec<Mention> = vec![];
    let mut clause = 0u32;
    let mut at = 0u32;
    // Words of the current English run, for phrases.
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut last_neg: Option<(u32, u32)> = None;
    let mut words: Vec<(&str, u32, u32)> = vec![];
    let mut i = 0;
    while i < chars.len() {
        let (bi, c) = chars[i];
        if c == QUOTE {
            push(&mut out, Concept::Quote, clause, at, &mut last_neg);
            i += 1;
            continue;
        }
        if clause_break(c) {
            clause += 1;
            i += 1;
            continue;
        }
        if is_cjk(c) {
            let mut matched = 0;
            if let Some(entries) = lex.zh.get(&c) {
                for (w, concept) in entries {
                    if i + w.len() <= chars.len()
                        && w.iter().zip(&chars[i..]).all(|(a, (_, b))| a == b)
                    {
                        if matched == 0 {
                            matched = w.len();
                        }
                        // Every entry of the longest length matches (a word may mean two things).
                        if w.len() == matched {
                            push(&mut out, *concept, clause, at, &mut last_neg);
                        }
                    }
                }
            }
            at += 1;
            i += matched.max(1);
            continue;
        }
        if c.is_ascii_alphanumeric() {
            let start = bi;
            let mut j = i;
            while j < chars.len() {
                let cj = chars[j].1;
                let inner = cj.is_ascii_alphanumeric()
                    || matches!(cj, '\'' | '-' | '/' | '_')
                    || cj == '.' && j + 1 < chars.len() && chars[j + 1].1.is_ascii_alphanumeric();
                if !inner {
                    break;
                }
                j += 1;
            }
            let end = if j < chars.len() {
                chars[j].0
            } else {
                text.len()
            };
            let word = text[start..end].trim_matches(|c: char| c == '\'' || c == '-');
            if !word.is_empty() {
                words.push((word, clause, at));
                at += 1;
            }
            i = j.max(i + 1);
            continue;
        }
        i += 1;
    }
    // English: phrases of three and two words first, then single words.
    let mut k = 0;
    let mut en: Vec<Mention> = vec![];
    let mut neg_state: Option<(u32, u32)> = None;
    while k < words.len() {
        let (w, cl, pos) = words[k];
        let mut took = 0;
        for len in [3usize, 2] {
            if k + len > words.len() || words[k..k + len].iter().any(|x| x.1 != cl) {
                continue;
            }
            let phrase = words[k..k + len]
                .iter()
                .map(|x| x.0)
                .collect::<Vec<_>>()
                .join("_");
            let mut hits: Option<&[Concept]> = lex.en.get(&phrase).map(|v| v.as_slice());
            if hits.is_none() && len == 2 {
                // Inflected first word: "turned off", "switching off".
                let first = words[k].0;
                for s in stems(first).skip(1) {
                    if let Some(v) = lex.en.get(&format!("{s}_{}", words[k + 1].0)) {
                        hits = Some(v.as_slice());
                        break;
                    }
                }
            }
            if let Some(cs) = hits {
                for c in cs {
                    push(&mut en, *c, cl, pos, &mut neg_state);
                }
                took = len;
                break;
            }
        }
        if took == 0 {
            for c in lookup(w) {
                push(&mut en, c, cl, pos, &mut neg_state);
            }
            took = 1;
        }
        k += took;
    }
    out.extend(en);
    out.sort_by_key(|m| (m.at, m.clause));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(t: &str) -> Vec<String> {
        concepts(t)
            .iter()
            .map(|m| format!("{}{}", if m.negated { "!" } else { "" }, m.concept.as_str()))
            .collect()
    }

    #[test]
    fn words_map_onto_concepts_in_both_languages() {
        let n = names("skip the review for refunds from now on");
        for c in ["rm", "ctrl", "money", "persist"] {
            assert!(n.iter().any(|x| x == c), "{c} in {n:?}");
        }
        let n = names("以后退款不用审批");
        for c in ["persist", "money", "without", "ctrl"] {
            assert!(n.iter().any(|x| x == c), "{c} in {n:?}");
        }
        let n = names("the policies were rescinded");
        assert!(
            n.iter().any(|x| x == "instr") && n.iter().any(|x| x == "void"),
            "{n:?}"
        );
    }

    #[test]
    fn negation_governs_what_follows_in_its_clause() {
        let n = names("don't approve refunds automatically, always ask me");
        assert!(n.iter().any(|x| x == "!grant"), "{n:?}");
        assert!(n.iter().any(|x| x == "strengthen"), "{n:?}");
    }
}
