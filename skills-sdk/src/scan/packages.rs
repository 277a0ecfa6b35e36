//! Package installs: unpinned versions and names a small edit away from popular packages.

use std::sync::LazyLock;

use regex::Regex;

use super::FindingSeverity::{Fail, Warn};
use super::lines::{Line, Sink};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Eco {
    Python,
    Npm,
    Other,
}

/// Popular Python packages (PyPI's most downloaded and the usual targets of squatting).
const POPULAR_PY: &[&str] = &[
    "requests",
    "urllib3",
    "numpy",
    "pandas",
    "boto3",
    "botocore",
    "setuptools",
    "wheel",
    "pip",
    "six",
    "python-dateutil",
    "pyyaml",
    "certifi",
    "idna",
    "charset-normalizer",
    "cryptography",
    "typing-extensions",
    "packaging",
    "attrs",
    "pydantic",
    "pydantic-core",
    "jinja2",
    "markupsafe",
    "click",
    "flask",
    "django",
    "fastapi",
    "uvicorn",
    "gunicorn",
    "starlette",
    "sqlalchemy",
    "psycopg2",
    "psycopg2-binary",
    "psycopg",
    "pymysql",
    "redis",
    "celery",
    "pytest",
    "pytest-cov",
    "coverage",
    "mock",
    "tox",
    "black",
    "flake8",
    "pylint",
    "mypy",
    "isort",
    "ruff",
    "scipy",
    "scikit-learn",
    "matplotlib",
    "seaborn",
    "plotly",
    "pillow",
    "opencv-python",
    "tensorflow",
    "torch",
    "torchvision",
    "torchaudio",
    "keras",
    "transformers",
    "tokenizers",
    "datasets",
    "huggingface-hub",
    "safetensors",
    "accelerate",
    "sentence-transformers",
    "openai",
    "anthropic",
    "langchain",
    "langchain-core",
    "langchain-community",
    "llama-index",
    "tiktoken",
    "httpx",
    "httpcore",
    "aiohttp",
    "beautifulsoup4",
    "lxml",
    "html5lib",
    "selenium",
    "playwright",
    "scrapy",
    "paramiko",
    "pyjwt",
    "jwt",
    "oauthlib",
    "requests-oauthlib",
    "rsa",
    "pyasn1",
    "protobuf",
    "grpcio",
    "google-auth",
    "google-api-python-client",
    "google-cloud-storage",
    "azure-core",
    "azure-storage-blob",
    "awscli",
    "s3transfer",
    "colorama",
    "termcolor",
    "tqdm",
    "rich",
    "typer",
    "python-dotenv",
    "dotenv",
    "pytz",
    "tzdata",
    "simplejson",
    "ujson",
    "orjson",
    "msgpack",
    "pyarrow",
    "polars",
    "openpyxl",
    "xlrd",
    "xlsxwriter",
    "python-docx",
    "python-pptx",
    "pypdf",
    "pypdf2",
    "pdfplumber",
    "reportlab",
    "markdown",
    "mistune",
    "docutils",
    "sphinx",
    "pygments",
    "networkx",
    "sympy",
    "nltk",
    "spacy",
    "gensim",
    "statsmodels",
    "xgboost",
    "lightgbm",
    "catboost",
    "numba",
    "cython",
    "jupyter",
    "notebook",
    "ipython",
    "ipykernel",
    "jupyterlab",
    "streamlit",
    "gradio",
    "dash",
    "bokeh",
    "imageio",
    "moviepy",
    "ffmpeg-python",
    "pydub",
    "psutil",
    "docker",
    "kubernetes",
    "ansible",
    "fabric",
    "invoke",
    "pexpect",
    "sh",
    "gitpython",
    "pygithub",
    "slack-sdk",
    "discord.py",
    "tweepy",
    "stripe",
    "twilio",
    "sendgrid",
    "websocket-client",
    "websockets",
    "pyserial",
    "pycryptodome",
    "pycrypto",
    "bcrypt",
    "passlib",
    "argon2-cffi",
    "mcp",
    "fastmcp",
    "boto",
    "scapy",
    "pyodbc",
    "pymongo",
    "motor",
    "elasticsearch",
    "opensearch-py",
    "qdrant-client",
    "chromadb",
    "pinecone-client",
    "faiss-cpu",
    "onnx",
    "onnxruntime",
    "jsonschema",
    "marshmallow",
    "toml",
    "tomli",
    "tomlkit",
    "ruamel.yaml",
    "filelock",
    "platformdirs",
    "virtualenv",
    "pipenv",
    "poetry",
    "uv",
    "hatch",
    "twine",
    "build",
    "wrapt",
    "decorator",
    "cffi",
    "pycparser",
    "greenlet",
    "gevent",
    "eventlet",
    "asyncio",
    "trio",
    "anyio",
    "sniffio",
    "h11",
    "yarl",
    "multidict",
    "frozenlist",
    "aiosignal",
    "async-timeout",
    "pyparsing",
    "regex",
    "chardet",
    "fsspec",
    "s3fs",
    "gcsfs",
    "joblib",
    "threadpoolctl",
    "cloudpickle",
    "dill",
    "lz4",
    "zstandard",
    "brotli",
    "pygame",
    "kivy",
    "pyqt5",
    "pyside6",
    "wxpython",
    "tkinter",
    "pyautogui",
    "pynput",
    "keyboard",
    "mouse",
    "pywin32",
    "comtypes",
    "wmi",
    "pyinstaller",
    "nuitka",
    "loguru",
    "structlog",
    "sentry-sdk",
    "prometheus-client",
    "opentelemetry-api",
    "flask-cors",
    "django-rest-framework",
    "djangorestframework",
    "graphene",
    "strawberry-graphql",
    "alembic",
    "peewee",
    "tortoise-orm",
    "sqlmodel",
    "weasyprint",
    "markdown2",
    "mammoth",
    "pdfminer.six",
    "camelot-py",
    "tabula-py",
    "python-multipart",
    "email-validator",
    "faker",
    "hypothesis",
    "freezegun",
    "responses",
    "vcrpy",
    "pytest-asyncio",
    "pytest-mock",
    "pytest-xdist",
    "nox",
    "pre-commit",
    "bandit",
    "safety",
    "semgrep",
    "yapf",
    "autopep8",
    "pycodestyle",
    "pyflakes",
    "pydocstyle",
    "pyright",
    "jedi",
    "parso",
    "prompt-toolkit",
    "click-plugins",
    "fire",
    "docopt",
    "argcomplete",
    "tabulate",
    "prettytable",
    "texttable",
    "humanize",
    "arrow",
    "pendulum",
    "dateparser",
    "babel",
    "unidecode",
    "python-slugify",
    "inflect",
    "emoji",
    "qrcode",
    "pyzbar",
    "opencv-contrib-python",
    "scikit-image",
    "albumentations",
    "timm",
    "einops",
    "diffusers",
    "peft",
    "bitsandbytes",
    "vllm",
    "llama-cpp-python",
    "ollama",
    "google-generativeai",
    "google-genai",
    "cohere",
    "mistralai",
    "groq",
    "litellm",
    "instructor",
    "dspy",
    "crewai",
    "autogen",
    "haystack-ai",
    "pyttsx3",
    "gtts",
    "speechrecognition",
    "whisper",
    "openai-whisper",
    "soundfile",
    "librosa",
    "sounddevice",
    "pyaudio",
    "ffmpeg",
];

/// Popular npm packages.
const POPULAR_NPM: &[&str] = &[
    "react",
    "react-dom",
    "preact",
    "vue",
    "svelte",
    "angular",
    "next",
    "nuxt",
    "vite",
    "vitest",
    "webpack",
    "webpack-cli",
    "rollup",
    "esbuild",
    "parcel",
    "babel",
    "typescript",
    "ts-node",
    "tsx",
    "eslint",
    "prettier",
    "jest",
    "mocha",
    "chai",
    "sinon",
    "cypress",
    "playwright",
    "puppeteer",
    "express",
    "koa",
    "fastify",
    "hapi",
    "nestjs",
    "axios",
    "node-fetch",
    "got",
    "request",
    "superagent",
    "lodash",
    "underscore",
    "ramda",
    "moment",
    "dayjs",
    "date-fns",
    "luxon",
    "chalk",
    "colors",
    "commander",
    "yargs",
    "minimist",
    "inquirer",
    "ora",
    "debug",
    "dotenv",
    "cross-env",
    "uuid",
    "nanoid",
    "classnames",
    "clsx",
    "tailwindcss",
    "postcss",
    "autoprefixer",
    "sass",
    "less",
    "styled-components",
    "emotion",
    "redux",
    "react-redux",
    "zustand",
    "mobx",
    "rxjs",
    "immer",
    "zod",
    "yup",
    "joi",
    "ajv",
    "mongoose",
    "mongodb",
    "pg",
    "mysql",
    "mysql2",
    "sqlite3",
    "better-sqlite3",
    "redis",
    "ioredis",
    "prisma",
    "sequelize",
    "typeorm",
    "knex",
    "drizzle-orm",
    "socket.io",
    "socket.io-client",
    "ws",
    "graphql",
    "apollo-server",
    "jsonwebtoken",
    "bcrypt",
    "bcryptjs",
    "passport",
    "cors",
    "helmet",
    "body-parser",
    "cookie-parser",
    "multer",
    "morgan",
    "winston",
    "pino",
    "nodemon",
    "pm2",
    "concurrently",
    "rimraf",
    "mkdirp",
    "glob",
    "fs-extra",
    "chokidar",
    "semver",
    "yaml",
    "js-yaml",
    "marked",
    "markdown-it",
    "highlight.js",
    "cheerio",
    "jsdom",
    "sharp",
    "jimp",
    "canvas",
    "pdfkit",
    "pdf-lib",
    "docx",
    "pptxgenjs",
    "exceljs",
    "xlsx",
    "papaparse",
    "csv-parse",
    "d3",
    "chart.js",
    "three",
    "openai",
    "@anthropic-ai/sdk",
    "@modelcontextprotocol/sdk",
    "langchain",
    "ai",
    "electron",
    "react-native",
    "expo",
    "firebase",
    "aws-sdk",
    "stripe",
    "twilio",
    "nodemailer",
    "discord.js",
    "telegraf",
    "node-cron",
    "cron",
    "shelljs",
    "execa",
    "cross-spawn",
    "node-gyp",
    "husky",
    "lint-staged",
    "lerna",
    "nx",
    "turbo",
    "pnpm",
    "yarn",
    "npm",
    "serve",
    "http-server",
    "live-server",
    "browser-sync",
    "vue-router",
    "react-router",
    "react-router-dom",
    "@tanstack/react-query",
    "swr",
    "formik",
    "react-hook-form",
    "framer-motion",
    "gsap",
    "lucide-react",
    "shadcn",
    "@radix-ui/react-dialog",
    "antd",
    "@mui/material",
    "bootstrap",
    "jquery",
    "handlebars",
    "ejs",
    "pug",
    "mustache",
    "qs",
    "querystring",
    "form-data",
    "busboy",
    "ethers",
    "web3",
    "bignumber.js",
    "decimal.js",
    "crypto-js",
    "node-forge",
    "tweetnacl",
    "buffer",
    "process",
    "events",
    "util",
    "path",
    "async",
    "bluebird",
    "p-limit",
    "p-queue",
    "eventemitter3",
    "core-js",
    "regenerator-runtime",
    "tslib",
    "@types/node",
    "@types/react",
    "zx",
    "tsup",
    "unbuild",
    "biome",
    "@biomejs/biome",
];

/// Whether two names are the same package: Python names compare case-insensitively with
/// `-`, `_` and `.` as one character (PEP 503).
fn normalise(name: &str, eco: Eco) -> String {
    let lower = name.to_ascii_lowercase();
    match eco {
        Eco::Python => lower.replace(['_', '.'], "-"),
        _ => lower,
    }
}

/// Optimal string alignment distance of two names, by character (the detector's).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    registry_detect::normalize::edit_distance(&a, &b)
}

/// The popular package `name` imitates, if it is one or two edits away from one (two only for
/// names of at least seven characters; names shorter than five are not judged) and is not a
/// popular package itself. `ecosystem` is `pip` or `npm`.
pub fn typosquat_of(name: &str, ecosystem: &str) -> Option<&'static str> {
    let eco = match ecosystem {
        "pip" | "python" | "pypi" => Eco::Python,
        "npm" | "node" => Eco::Npm,
        _ => return None,
    };
    squat(name, eco)
}

fn squat(name: &str, eco: Eco) -> Option<&'static str> {
    let list = match eco {
        Eco::Python => POPULAR_PY,
        Eco::Npm => POPULAR_NPM,
        Eco::Other => return None,
    };
    let n = normalise(name, eco);
    if n.chars().count() < 5 || list.iter().any(|p| normalise(p, eco) == n) {
        return None;
    }
    list.iter().copied().find(|p| {
        let p = normalise(p, eco);
        let d = edit_distance(&n, &p);
        d == 1 || (d == 2 && n.chars().count() >= 7 && p.chars().count() >= 7)
    })
}

static INSTALL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"\b(?P<cmd>pip[0-9.]*\s+install|python[0-9.]*\s+-m\s+pip\s+install|uv\s+pip\s+install|uv\s+add|poetry\s+add|pipx\s+install|pdm\s+add",
        r"|npm\s+(install|i|add)|yarn\s+(global\s+)?add|pnpm\s+(add|install|i)|bun\s+(add|install|i)|npx|bunx|pnpx",
        r"|gem\s+install|cargo\s+install|go\s+install)\b(?P<args>[^;&|`)\n]*)"
    ))
    .expect("install regex")
});

/// Options whose next word is a value, not a package.
const VALUE_OPTS: &[&str] = &[
    "-r",
    "--requirement",
    "-c",
    "--constraint",
    "-e",
    "--editable",
    "-i",
    "--index-url",
    "--extra-index-url",
    "-f",
    "--find-links",
    "--target",
    "-t",
    "--prefix",
    "--root",
    "--registry",
    "--cache",
    "--python",
    "-p",
    "--version",
    "--vers",
    "--git",
    "--branch",
    "--tag",
    "--rev",
    "--path",
    "--package",
    "--save-prefix",
    "--platform",
    "--only-binary",
    "--no-binary",
    "--upgrade-strategy",
    "--group",
    "-g",
    "--config",
];

/// An install command on one line: each package checked for a pin and for its name.
pub(crate) fn install_line(l: &Line<'_>, sink: &mut Sink<'_>) {
    let Some(c) = INSTALL.captures(&l.low) else {
        return;
    };
    let cmd = c.name("cmd").map_or("", |m| m.as_str());
    let args = c.name("args").map_or("", |m| m.as_str());
    let eco = if cmd.starts_with("pip")
        || cmd.starts_with("python")
        || cmd.starts_with("uv")
        || cmd.starts_with("poetry")
        || cmd.starts_with("pipx")
        || cmd.starts_with("pdm")
    {
        Eco::Python
    } else if cmd.starts_with("gem") || cmd.starts_with("cargo") || cmd.starts_with("go") {
        Eco::Other
    } else {
        Eco::Npm
    };
    let runs = cmd.starts_with("npx") || cmd.starts_with("bunx") || cmd.starts_with("pnpx");
    let mut skip_next = false;
    let mut unpinned = vec![];
    for word in args.split_whitespace() {
        let w = word.trim_matches(|c| c == '"' || c == '\'' || c == ',');
        if skip_next {
            skip_next = false;
            continue;
        }
        if w.starts_with('-') {
            skip_next = VALUE_OPTS.contains(&w);
            continue;
        }
        if w.is_empty()
            || w.starts_with('.')
            || w.starts_with('/')
            || w.starts_with('$')
            || w.starts_with('<')
            || w.starts_with('{')
            || w.starts_with('[')
            || w.ends_with(".txt")
            || w.ends_with(".whl")
            || w.ends_with(".tgz")
            || w.ends_with(".toml")
            || w == "install"
            || w == "#"
        {
            if w == "#" {
                break;
            }
            continue;
        }
        if w.contains("://") || w.starts_with("git+") || w.starts_with("github:") {
            let pinned = w
                .rsplit(['@', '#'])
                .next()
                .is_some_and(|r| r.len() == 40 && r.chars().all(|c| c.is_ascii_hexdigit()));
            if !pinned {
                unpinned.push(w.to_string());
            }
            continue;
        }
        let (name, pinned) = split_spec(w, eco);
        if name.is_empty()
            || !name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '@')
        {
            continue;
        }
        if let Some(real) = squat(&name, eco) {
            sink.hit(
                "install.typosquat",
                Fail,
                l,
                format!("installs {name}, a name one or two edits from the popular package {real}"),
            );
        }
        if !pinned && !runs {
            unpinned.push(name);
        }
        if runs {
            break; // npx runs its first package; the rest are its arguments
        }
    }
    if !unpinned.is_empty() {
        sink.hit(
            "install.unpinned",
            Warn,
            l,
            format!("installs without an exact version: {}", unpinned.join(", ")),
        );
    }
}

/// A package argument's name and whether it names an exact version.
fn split_spec(w: &str, eco: Eco) -> (String, bool) {
    match eco {
        Eco::Python => {
            let cut = w.find(|c: char| "=<>!~;[ ".contains(c)).unwrap_or(w.len());
            let name = w[..cut].to_string();
            let pinned = w.contains("==") && !w.contains('*');
            (name, pinned)
        }
        Eco::Npm => {
            let (scope, rest) = match w.strip_prefix('@') {
                Some(r) => ("@", r),
                None => ("", w),
            };
            match rest.split_once('@') {
                Some((n, v)) => (
                    format!("{scope}{n}"),
                    v.chars().next().is_some_and(|c| c.is_ascii_digit())
                        && !v.contains(['^', '~', '*', 'x', '>', '<']),
                ),
                None => (w.to_string(), false),
            }
        }
        Eco::Other => match w.split_once('@') {
            Some((n, v)) => (n.to_string(), v != "latest"),
            None => (w.to_string(), false),
        },
    }
}

/// Dependency lists shipped with the skill: `requirements*.txt` and `package.json`.
pub(crate) fn scan_manifest_file(path: &str, text: &str, sink: &mut Sink<'_>) {
    let name = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    if name.starts_with("requirements") && name.ends_with(".txt") {
        let mut unpinned = vec![];
        let mut first = None;
        for (i, raw) in text.lines().enumerate() {
            let t = raw.split('#').next().unwrap_or("").trim();
            if t.is_empty() || t.starts_with('-') {
                continue;
            }
            let l = Line {
                no: i + 1,
                raw,
                low: t.to_ascii_lowercase(),
                place: super::lines::Place::Code,
                example: false,
                unit: 0,
            };
            let (pkg, pinned) = split_spec(&l.low, Eco::Python);
            if let Some(real) = squat(&pkg, Eco::Python) {
                sink.hit(
                    "install.typosquat",
                    Fail,
                    &l,
                    format!(
                        "requires {pkg}, a name one or two edits from the popular package {real}"
                    ),
                );
            }
            if !pinned {
                unpinned.push(pkg);
                first.get_or_insert(l);
            }
        }
        if let Some(l) = first {
            sink.hit(
                "install.unpinned",
                Warn,
                &l,
                format!(
                    "requirements without an exact version: {}",
                    unpinned.join(", ")
                ),
            );
        }
    } else if name == "package.json"
        && let Ok(v) = serde_json::from_str::<serde_json::Value>(text)
    {
        for key in ["dependencies", "devDependencies", "optionalDependencies"] {
            let Some(deps) = v.get(key).and_then(|d| d.as_object()) else {
                continue;
            };
            for (pkg, _) in deps {
                if let Some(real) = squat(pkg, Eco::Npm) {
                    let no = text
                        .lines()
                        .position(|l| l.contains(&format!("\"{pkg}\"")))
                        .map_or(1, |i| i + 1);
                    let raw = text.lines().nth(no - 1).unwrap_or("");
                    let l = Line {
                        no,
                        raw,
                        low: raw.to_ascii_lowercase(),
                        place: super::lines::Place::Code,
                        example: false,
                        unit: 0,
                    };
                    sink.hit(
                        "install.typosquat",
                        Fail,
                        &l,
                        format!("depends on {pkg}, a name one or two edits from the popular package {real}"),
                    );
                }
            }
        }
    }
}
