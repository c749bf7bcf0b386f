//! `spex board` in a real headless Chromium (issue 29, "what it must show" 5): the page a person
//! opens, driven through its buttons and fields, against real harness sessions on fake model
//! servers. A Claude session's permission dialog reaches the page within 1 s of its record and
//! is allowed there (the tool runs); a delivery shows its stages; a question is answered by
//! option; an edit's diff is shown per file; a Codex approval is denied; sessions of two
//! projects share one board; a killed session turns exited without a reload; crafted HTML,
//! script and terminal escapes in session text stay inert text; at a phone's size (390x844) nothing scrolls sideways. With
//! `SPEX_UPDATE_DOCS=1` the two-project test writes the README's screenshot, `docs/board.png`.
//! Needs `scripts/install-peers.sh` and `scripts/install-test-tools.sh`; fails, never skips.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use crate::answering::{codex, codex_diag, codex_rig, codex_waits};
use crate::runtime::{claude_world, host_log, launch, spex_cmd};
use crate::support::browser::{Browser, DESKTOP, PHONE, Page, js_string};
use crate::support::claude_home::{DUMMY_API_KEY, SeedOptions, seed_claude_home};
use crate::support::fake_anthropic::FakeAnthropic;
use crate::support::world::{World, git, pretty, write};

/// A running `spex board` (ended when dropped) and the address it printed, token included.
pub struct Board {
    pub(crate) child: Child,
    pub url: String,
}

impl Drop for Board {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Board {
    /// Starts `cmd` (a `spex board --json` command) and reads the address from its first line.
    pub fn start(mut cmd: Command) -> Board {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spex board starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        Board {
            child,
            url: v["url"].as_str().expect("the board's url").to_owned(),
        }
    }
}

/// `spex board` on a free port, with the world's (and the fake's) environment.
fn board(w: &World, fake: &FakeAnthropic) -> Board {
    Board::start(spex_cmd(
        w,
        fake,
        &["board", "--listen", "127.0.0.1:0", "--json"],
    ))
}

/// Opens the board's address in `browser` and waits until its socket is live; the token has
/// left the address bar.
pub fn open_board(
    browser: &Browser,
    board: &Board,
    viewport: crate::support::browser::Viewport,
) -> Page {
    let page = browser.open(&board.url, viewport);
    page.wait_for(
        "the board's socket to open",
        "document.querySelector('#conn').dataset.state === 'open'",
        Duration::from_secs(10),
    );
    assert!(!page.url().contains("token"), "{}", page.url());
    page
}

/// The selector of session `id`'s card.
pub fn card(id: &str) -> String {
    format!("li.session[data-session$=\"/{id}\"]")
}

/// The JavaScript expression: session `id`'s card is in `group`.
fn in_group(id: &str, group: &str) -> String {
    format!(
        "(c => c && c.dataset.group === {g} && c.closest('section').dataset.group === {g})(document.querySelector({c}))",
        g = js_string(group),
        c = js_string(&card(id)),
    )
}

/// A time the store wrote.
fn store_time(v: &Value) -> SystemTime {
    humantime::parse_rfc3339_weak(v.as_str().unwrap_or_else(|| panic!("a time: {v}")))
        .unwrap_or_else(|e| panic!("{e}: {v}"))
}

/// How long after `record` the page showed it (zero when the page was first: the store's
/// clock is read before its record is written).
fn after(shown: SystemTime, record: SystemTime) -> Duration {
    shown.duration_since(record).unwrap_or_default()
}

/// Waits until session `id`'s attention `att` has a hook waiting for its answer.
fn hooked(w: &World, id: &str, att: &str) {
    let deadline = Instant::now() + Duration::from_mins(1);
    while !(w.record(id)["attention"]["id"] == att
        && w.record(id)["attention"]["via"]["how"] == "hook")
    {
        assert!(
            Instant::now() < deadline,
            "no hook waits for {att}\n{}",
            host_log(w, id)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Types `text` into session `id`'s prompt on the page and presses its Deliver button.
fn deliver(page: &Page, id: &str, text: &str) {
    let c = card(id);
    page.type_into(&format!("{c} textarea[data-field=prompt]"), text);
    page.click(&format!("{c} button[data-action=deliver]"));
}

/// The model's requests so far, as text.
fn model_heard(fake: &FakeAnthropic) -> String {
    fake.requests()
        .iter()
        .map(|r| r["body"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn last_closed(w: &World, id: &str) -> Value {
    w.events(id)
        .into_iter()
        .rfind(|e| e["kind"] == "attention.closed")
        .unwrap_or(Value::Null)
}

#[test]
fn board_in_a_browser_answers_a_real_claude_sessions_permission_and_question() {
    let (w, fake) = claude_world(SeedOptions::default());
    // A committed file for the session to edit: its diff is against the commit it started at.
    write(&w.repo.join("notes.txt"), "hello world\n");
    git(&w.repo, &["add", "-A"]);
    git(&w.repo, &["commit", "-q", "-m", "base"]);
    let id = launch(&w, &fake);
    let b = board(&w, &fake);
    let browser = Browser::start();
    let page = open_board(&browser, &b, DESKTOP);
    let c = card(&id);
    page.wait_for(
        "the session on the board",
        &in_group(&id, "idle"),
        Duration::from_secs(10),
    );
    assert_eq!(page.text(&format!("{c} [data-field=harness]")), "claude");
    assert_eq!(page.text(&format!("{c} [data-field=project]")), "repo");

    // Deliver from the page: the receipt shows the stages as they come; the permission dialog
    // the prompt leads to reaches the page within 1 s of the record saying so.
    page.mark_when("dialog", &in_group(&id, "needs_you"));
    let out = w.repo.join("bash_out.txt");
    deliver(&page, &id, "USE_BASH run it");
    page.wait_for(
        "the delivery's first stage",
        &format!("document.querySelector('{c} [data-field=receipt]').dataset.stage"),
        Duration::from_secs(30),
    );
    let shown = page.wait_mark("dialog", Duration::from_mins(1));
    let a = w.record(&id)["attention"].clone();
    let took = after(shown, store_time(&a["since"]));
    eprintln!(
        "permission dialog on the page {} ms after its record",
        took.as_millis()
    );
    assert!(took < Duration::from_secs(1), "{took:?}\n{}", pretty(&a));
    let att = a["id"].as_str().unwrap().to_owned();
    let box_ = format!("{c} .attention[data-attention=\"{att}\"]");
    page.wait_text(
        &format!("{box_} [data-field=question]"),
        "bash_out.txt",
        Duration::from_secs(5),
    );
    assert_eq!(page.text(&format!("{box_} [data-field=tool]")), "Bash");
    for choice in ["allow", "deny"] {
        assert_eq!(
            page.count(&format!(
                "{box_} button[data-action=answer][data-choice={choice}]"
            )),
            1,
            "{}",
            page.body_text()
        );
    }

    // Allow from the page: the tool runs, the answer is recorded as the board's.
    hooked(&w, &id, &att);
    assert!(!out.exists());
    page.click(&format!(
        "{box_} button[data-action=answer][data-choice=allow]"
    ));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !out.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        out.exists(),
        "the command did not run\n{}",
        host_log(&w, &id)
    );
    let closed = last_closed(&w, &id);
    assert_eq!(closed["by"], "board", "{}", pretty(&closed));
    assert_eq!(closed["choice"], "allow", "{}", pretty(&closed));
    // The delivery's stages end in `done`, shown in order.
    page.wait_for(
        "the delivery's `done` stage",
        &format!("document.querySelector('{c} [data-field=receipt]').dataset.stage === 'done'"),
        Duration::from_mins(1),
    );
    let receipt = page.text(&format!("{c} [data-field=receipt]"));
    let (accepted, done) = (receipt.find("accepted"), receipt.find("done"));
    assert!(
        accepted.is_some() && done.is_some() && accepted < done,
        "{receipt}"
    );
    page.wait_for(
        "the session idle again",
        &in_group(&id, "idle"),
        Duration::from_mins(1),
    );

    // A question, answered by option on the page: the model hears the option.
    deliver(&page, &id, "USE_ASK pick one");
    page.wait_for(
        "the question on the page",
        &format!("document.querySelector('{c} input[data-option=\"Blue\"]')"),
        Duration::from_mins(1),
    );
    assert!(page.count(&format!("{c} input[data-option=\"Red\"]")) == 1);
    let att = w.record(&id)["attention"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    hooked(&w, &id, &att);
    page.click(&format!("{c} input[data-option=\"Blue\"]"));
    page.click(&format!("{c} button[data-action=answer-questions]"));
    let deadline = Instant::now() + Duration::from_secs(30);
    let want = "=\\\"Blue\\\"";
    while !model_heard(&fake).contains(want) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        model_heard(&fake).contains(want),
        "the model never got the answer\n{}",
        host_log(&w, &id)
    );
    assert_eq!(last_closed(&w, &id)["by"], "board");
    page.wait_for(
        "the session idle again",
        &in_group(&id, "idle"),
        Duration::from_mins(1),
    );

    // An edit, allowed on the page; then the session's diff there, per file, as text.
    deliver(&page, &id, "Please edit the file. USE_EDIT FILE=notes.txt");
    page.wait_for(
        "the edit's dialog",
        &in_group(&id, "needs_you"),
        Duration::from_mins(1),
    );
    let att = w.record(&id)["attention"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    hooked(&w, &id, &att);
    page.click(&format!(
        "{c} .attention[data-attention=\"{att}\"] button[data-action=answer][data-choice=allow]"
    ));
    let notes = w.repo.join("notes.txt");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&notes).unwrap() != "goodbye world\n" && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "goodbye world\n",
        "{}",
        host_log(&w, &id)
    );
    page.wait_for(
        "the session idle again",
        &in_group(&id, "idle"),
        Duration::from_mins(1),
    );
    page.click(&format!("{c} button[data-action=diff]"));
    let file = format!("{c} details[data-file=\"notes.txt\"]");
    page.wait_for(
        "the diff on the page",
        &format!("document.querySelector({})", js_string(&file)),
        Duration::from_secs(30),
    );
    let shown = page.eval(&format!(
        "(d => ({{ touched: d.dataset.touched, patch: d.querySelector('pre[data-field=patch]').textContent }}))(document.querySelector({}))",
        js_string(&file)
    ));
    assert_eq!(shown["touched"], "true", "{}", pretty(&shown));
    let patch = shown["patch"].as_str().unwrap_or_default();
    assert!(
        patch.contains("-hello world") && patch.contains("+goodbye world"),
        "{patch}"
    );
    assert!(page.errors().is_empty(), "{:?}", page.errors());
    crate::runtime::stop(&w, &fake, &id);
    page.wait_for(
        "the stopped session exited",
        &in_group(&id, "exited"),
        Duration::from_secs(10),
    );
}

#[test]
fn board_in_a_browser_denies_a_real_codex_approval() {
    let (w, fake) = codex_rig();
    let out = w.repo.join("escalated.txt");
    let mut cmd = codex(&w, &["board", "--listen", "127.0.0.1:0", "--json"]);
    cmd.stdin(Stdio::null());
    let b = Board::start(cmd);
    let browser = Browser::start();
    let page = open_board(&browser, &b, DESKTOP);
    let launched = crate::support::world::json_result(
        &["launch"],
        &codex(
            &w,
            &[
                "launch",
                "--harness",
                "codex",
                "--detach",
                "--json",
                "SCENARIO:escalate",
            ],
        )
        .output()
        .unwrap(),
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", codex_diag(&w, &fake)));
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let c = card(&id);
    page.mark_when("approval", &in_group(&id, "needs_you"));
    let a = codex_waits(&w, &fake, &id);
    let shown = page.wait_mark("approval", Duration::from_secs(10));
    let took = after(shown, store_time(&a["since"]));
    eprintln!(
        "codex approval on the page {} ms after its record",
        took.as_millis()
    );
    assert!(took < Duration::from_secs(1), "{took:?}\n{}", pretty(&a));
    assert_eq!(page.text(&format!("{c} [data-field=harness]")), "codex");
    let box_ = format!(
        "{c} .attention[data-attention=\"{}\"]",
        a["id"].as_str().unwrap()
    );
    let ids = page.eval(&format!(
        "[...document.querySelectorAll({})].map(b => b.dataset.choice)",
        js_string(&format!("{box_} button[data-action=answer]"))
    ));
    assert_eq!(
        ids,
        serde_json::json!(["allow", "allow-session", "deny", "cancel"]),
        "{}",
        page.body_text()
    );
    page.click(&format!(
        "{box_} button[data-action=answer][data-choice=deny]"
    ));
    let deadline = Instant::now() + Duration::from_secs(30);
    let heard = || {
        fake.requests()
            .iter()
            .any(|r| r["body"].to_string().contains("rejected by user"))
    };
    while !heard() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(heard(), "the model was not told\n{}", codex_diag(&w, &fake));
    assert!(!out.exists(), "the denied command ran");
    let closed = w
        .events(&id)
        .into_iter()
        .rfind(|e| e["kind"] == "attention.closed")
        .unwrap_or(Value::Null);
    assert_eq!(closed["by"], "board", "{}", pretty(&closed));
    page.wait_text(
        &format!("{c} [data-field=result]"),
        "answered",
        Duration::from_secs(10),
    );
    assert_eq!(
        page.eval(&format!(
            "document.querySelector('{c} [data-field=result]').dataset.ok"
        )),
        "true"
    );
    assert!(page.errors().is_empty(), "{:?}", page.errors());
    let _ = codex(&w, &["stop", &id]).output();
    let _ = codex(&w, &["server", "stop"]).output();
}

/// A second project beside the world's repository, selecting Claude, materialized.
fn second_project(w: &World, name: &str) -> PathBuf {
    let repo = w.dir.path().join(name);
    std::fs::create_dir_all(&repo).unwrap();
    let repo = std::fs::canonicalize(repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    write(
        &repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"] }\n",
    );
    w.ok(&repo, &["materialize"]);
    repo
}

/// `spex launch` of a Claude session in `repo`: its result.
fn launch_in(w: &World, fake: &FakeAnthropic, repo: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["launch", "--harness", "claude", "--detach", "--json"];
    args.extend_from_slice(extra);
    let out = spex_cmd(w, fake, &args).current_dir(repo).output().unwrap();
    crate::support::world::json_result(&args, &out).unwrap_or_else(|e| panic!("{e}"))
}

/// Text made to break a page that renders it as markup or a terminal that obeys it.
const CRAFTED: &str = "<img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=2</script>\u{1b}]0;pwned\u{7}\u{1b}[31mred</b>";

#[test]
fn board_in_a_browser_shows_two_projects_inert_text_a_phone_and_a_killed_session() {
    let (w, fake) = claude_world(SeedOptions::default());
    let other = second_project(&w, "other");
    seed_claude_home(
        &w.home,
        DUMMY_API_KEY,
        &[&w.repo, &other],
        SeedOptions::default(),
    );
    let first = launch(&w, &fake);
    let second = launch_in(&w, &fake, &other, &[]);
    let second_id = second["session"]["id"].as_str().unwrap().to_owned();
    let second_pid = second["session"]["child_pid"].as_i64().unwrap();
    // Two projects in one store: the world's one-project readers no longer apply.
    w.skip_grammar();
    let b = board(&w, &fake);
    let browser = Browser::start();
    let page = open_board(&browser, &b, DESKTOP);
    page.wait_for(
        "the first project's session",
        &in_group(&first, "idle"),
        Duration::from_secs(10),
    );
    page.wait_for(
        "the second project's session",
        &in_group(&second_id, "idle"),
        Duration::from_secs(10),
    );
    let projects = page.eval(
        "[...new Set([...document.querySelectorAll('li.session')].map(c => c.querySelector('[data-field=project]').innerText))].sort()",
    );
    assert_eq!(
        projects,
        serde_json::json!(["other", "repo"]),
        "{}",
        page.body_text()
    );
    let keys = page.eval(
        "new Set([...document.querySelectorAll('li.session')].map(c => c.dataset.project)).size",
    );
    assert_eq!(keys, 2);

    // The second project's session asks to run a command; with `SPEX_UPDATE_DOCS=1` that
    // board is the README's screenshot: two projects, one session waiting for the person.
    deliver(&page, &second_id, "USE_BASH run it");
    page.wait_for(
        "the second project's dialog",
        &format!(
            "document.querySelector({}) && {}",
            js_string(&format!("{} [data-field=question]", card(&second_id))),
            in_group(&second_id, "needs_you")
        ),
        Duration::from_mins(1),
    );
    page.wait_text(
        &format!("{} [data-field=receipt]", card(&second_id)),
        "started",
        Duration::from_secs(10),
    );
    if std::env::var_os("SPEX_UPDATE_DOCS").is_some() {
        let png = page.screenshot_png();
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/board.png");
        std::fs::write(&path, png).unwrap();
        eprintln!("wrote {}", path.display());
    }

    // Session text with markup, script and terminal escapes: a Bash command in a dialog (it
    // writes a file, so Claude asks).
    let c = card(&first);
    page.eval(&format!(
        "(() => {{ const t = document.querySelector({}); t.value = {}; }})()",
        js_string(&format!("{c} textarea[data-field=prompt]")),
        js_string(&format!("USE_BASHCMD <<echo '{CRAFTED}' > crafted.txt>>")),
    ));
    page.click(&format!("{c} button[data-action=deliver]"));
    page.wait_for(
        "the crafted dialog",
        &in_group(&first, "needs_you"),
        Duration::from_mins(1),
    );
    let tool = page.wait_text(
        &format!("{c} [data-field=question]"),
        "<script>",
        Duration::from_secs(5),
    );
    assert!(tool.contains("<img src=x onerror="), "{tool:?}");
    let inside = page.eval(&format!(
        "document.querySelectorAll({}).length",
        js_string(&format!("{c} img, {c} script, {c} b"))
    ));
    assert_eq!(inside, 0, "markup from session text became elements");
    assert_eq!(page.eval("window.__pwned === undefined"), true);
    assert_eq!(
        page.eval("document.title"),
        "spex board",
        "an escape set the title"
    );
    assert!(
        !page.html().contains("<script>window.__pwned"),
        "{}",
        page.html()
    );

    // A phone: nothing scrolls sideways, with the dialog's long command open.
    let phone = browser.open(&b.url, PHONE);
    phone.wait_for(
        "the dialog on the phone",
        &in_group(&first, "needs_you"),
        Duration::from_secs(10),
    );
    phone.wait_for(
        "both sessions on the phone",
        &in_group(&second_id, "needs_you"),
        Duration::from_secs(10),
    );
    assert_eq!(phone.eval("window.innerWidth"), 390);
    let overflow = phone.horizontal_overflow();
    assert_eq!(
        overflow, 0,
        "the page scrolls {overflow} px sideways at 390x844"
    );
    let wide = phone.eval(
        "[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > innerWidth + 0.5).map(e => e.tagName + '.' + e.className + '[' + (e.dataset.field || '') + ']').slice(0, 10)",
    );
    assert_eq!(
        wide,
        serde_json::json!([]),
        "elements past the phone's right edge"
    );
    assert!(phone.errors().is_empty(), "{:?}", phone.errors());

    // A killed session turns exited on the open page, without a reload.
    page.eval("window.__samePage = true");
    page.mark_when("exited", &in_group(&second_id, "exited"));
    let killed = SystemTime::now();
    Command::new("kill")
        .args(["-9", &second_pid.to_string()])
        .status()
        .unwrap();
    let shown = page.wait_mark("exited", Duration::from_secs(10));
    eprintln!(
        "killed session exited on the page {} ms after the kill",
        after(shown, killed).as_millis()
    );
    assert!(
        after(shown, killed) < Duration::from_secs(2),
        "{:?}",
        after(shown, killed)
    );
    assert_eq!(page.eval("window.__samePage"), true, "the page reloaded");
    assert!(page.errors().is_empty(), "{:?}", page.errors());

    // Deny the crafted command (it never runs) and stop the first session.
    page.click(&format!("{c} button[data-action=answer][data-choice=deny]"));
    page.wait_for(
        "the first session past its dialog",
        &format!("!({})", in_group(&first, "needs_you")),
        Duration::from_mins(1),
    );
    assert!(
        !w.repo.join("crafted.txt").exists(),
        "the denied command ran"
    );
    let _ = spex_cmd(&w, &fake, &["stop", &first]).output();
}
