//! Answering a hosted Gemini CLI session's dialogs with the REAL pinned CLI (offline, fake
//! Gemini API): `spex deny` / `approve` / `answer allow-session` at its permission dialogs and
//! `spex answer` at its `ask_user` question, each checked by what Gemini did (the file the
//! command or edit makes exists or does not; what the model was sent); a denial, on which Gemini
//! fires no hook, still ends the attention and the turn. A session the person started in their
//! own terminal can be answered there only.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::gemini_runtime::{deliver, gemini_world, launch_gemini, wait_turn};
use crate::runtime::{host_log, run_json, screen, spex_cmd, stop};
use crate::support::fake_gemini::{self, FakeGemini};
use crate::support::gemini_home::{gemini_command, wait_tui_ready};
use crate::support::term::Term;
use crate::support::world::{World, pretty, read_or_empty, wait_status};

const TURN: Duration = Duration::from_mins(1);

/// Waits until the session waits on a dialog; its open attention.
fn attention(w: &World, fake: &FakeGemini, id: &str) -> Value {
    let r = wait_status(w, id, "needs_attention", TURN);
    assert_eq!(
        r["status"],
        "needs_attention",
        "{}\n{}\n{}",
        pretty(&r),
        host_log(w, id),
        screen(w, fake, id)
    );
    r["attention"].clone()
}

fn answer(w: &World, fake: &FakeGemini, id: &str, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    run_json(w, fake, &all)
        .unwrap_or_else(|e| panic!("{e}\n{}\nscreen:\n{}", host_log(w, id), screen(w, fake, id)))
}

/// Whether the model was sent a result of `tool` after the newest prompt holding `prompt`.
fn tool_result_sent(fake: &FakeGemini, prompt: &str, tool: &str) -> bool {
    fake.stream_requests().iter().any(|r| {
        let contents = r["body"]["contents"].to_string();
        contents.contains(prompt)
            && contents.contains(&format!("\"name\":\"{tool}\""))
            && contents.contains("functionResponse")
    })
}

#[test]
fn deny_approve_and_allow_for_the_session_at_hosted_gemini_dialogs() {
    let (w, fake) = gemini_world();
    let (id, _) = launch_gemini(&w, &fake, &[]);

    // An edit denied (the dialog's 4th option): nothing is written, and though Gemini fires
    // no hook, the attention closes and the turn ends as the title goes back to Ready.
    deliver(&w, &fake, &id, "SCENARIO:write");
    let a = attention(&w, &fake, &id);
    assert_eq!(a["via"]["how"], "keys", "{}", pretty(&a));
    let denied = answer(&w, &fake, &id, &["deny", &id]);
    assert_eq!(denied["via"], "keys", "{}", pretty(&denied));
    let r = wait_status(&w, &id, "idle", TURN);
    assert!(r["attention"].is_null(), "{}", pretty(&r));
    assert_eq!(r["turn"]["state"], "interrupted", "{}", pretty(&r));
    assert!(!w.repo.join(fake_gemini::WRITE_FILE).exists());
    assert!(!tool_result_sent(&fake, "SCENARIO:write", "write_file"));
    let title = run_json(&w, &fake, &["snapshot", &id, "--json"]).unwrap()["title"].clone();
    assert!(title.as_str().unwrap().starts_with("◇  Ready"), "{title}");
    let closed: Vec<Value> = w
        .events(&id)
        .into_iter()
        .filter(|e| e["kind"] == "attention.closed")
        .collect();
    assert_eq!(closed.len(), 1, "{}", host_log(&w, &id));

    // A command approved: it ran, and its result went to the model.
    let approve = "SCENARIO:shellcmd <<touch approved.txt>>";
    deliver(&w, &fake, &id, approve);
    let a = attention(&w, &fake, &id);
    assert!(
        a["text"].as_str().unwrap().contains("touch approved.txt"),
        "{}",
        pretty(&a)
    );
    answer(&w, &fake, &id, &["approve", &id]);
    wait_turn(&w, &id, "completed");
    assert!(
        w.repo.join("approved.txt").exists(),
        "{}",
        host_log(&w, &id)
    );
    assert!(tool_result_sent(&fake, approve, "run_shell_command"));

    // Allowed for the session: the next such command runs without a dialog.
    deliver(&w, &fake, &id, "SCENARIO:shellcmd <<touch first.txt>>");
    attention(&w, &fake, &id);
    answer(&w, &fake, &id, &["answer", &id, "allow-session"]);
    wait_turn(&w, &id, "completed");
    assert!(w.repo.join("first.txt").exists());
    deliver(&w, &fake, &id, "SCENARIO:shellcmd <<touch second.txt>>");
    let done = wait_turn(&w, &id, "completed");
    assert!(w.repo.join("second.txt").exists(), "{}", pretty(&done));
    let opened = w
        .events(&id)
        .into_iter()
        .filter(|e| e["kind"] == "attention.opened")
        .count();
    assert_eq!(opened, 3, "{}", host_log(&w, &id));
    stop(&w, &fake, &id);
}

#[test]
fn a_hosted_gemini_question_is_answered_by_option_and_by_free_text() {
    let (w, fake) = gemini_world();
    let (id, _) = launch_gemini(&w, &fake, &[]);
    for (prompt, given, got) in [
        ("SCENARIO:ask one", "2", "blue"),
        ("SCENARIO:ask two", "green like grass", "green like grass"),
    ] {
        deliver(&w, &fake, &id, prompt);
        let a = attention(&w, &fake, &id);
        assert_eq!(
            a["questions"][0]["question"],
            fake_gemini::ASK_QUESTION,
            "{}",
            pretty(&a)
        );
        answer(&w, &fake, &id, &["answer", &id, given]);
        // The model got the answer as the tool's result.
        let sent = fake
            .request_within(
                |r| {
                    let c = r["body"]["contents"].to_string();
                    c.contains(prompt) && c.contains(&format!("\\\"0\\\":\\\"{got}\\\""))
                },
                TURN,
            )
            .unwrap_or_else(|| panic!("{got}: {:#?}", fake.request_lines()));
        assert!(sent["body"].to_string().contains("ask_user"));
        wait_turn(&w, &id, "completed");
    }
    stop(&w, &fake, &id);
}

/// A Gemini CLI the person runs in their own terminal, spex's hooks reporting its dialog:
/// spex cannot type into it, and Gemini's hooks cannot answer, so it refuses and types nothing.
#[test]
fn a_dialog_of_gemini_in_the_persons_own_terminal_is_answered_there_only() {
    let (w, fake) = gemini_world();
    let mut cmd = gemini_command(&w.home, &fake.base_url());
    cmd.current_dir(&w.repo).env("SPEX_HOME", &w.spex_home);
    let t = Term::spawn(&cmd, 40, 120);
    wait_tui_ready(&t, TURN).unwrap();
    crate::support::gemini_home::submit_prompt(
        &t,
        "SCENARIO:shellcmd <<touch mine.txt>>",
        TURN,
        || {
            fake.prompt_within("touch mine.txt", Duration::ZERO)
                .is_some()
        },
    )
    .unwrap();
    t.wait_for("Allow execution of", TURN).unwrap();
    let deadline = Instant::now() + TURN;
    let id = loop {
        let listed = run_json(&w, &fake, &["sessions", "--json"]).unwrap();
        let waiting = listed
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["status"] == "needs_attention")
            .and_then(|s| s["id"].as_str().map(str::to_owned));
        if let Some(id) = waiting {
            break id;
        }
        assert!(
            Instant::now() < deadline,
            "no attention: {listed}\n{}",
            t.diag()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(w.record(&id)["attention"]["via"]["how"], "terminal only");
    let out = spex_cmd(&w, &fake, &["approve", &id]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("can be answered only at its terminal"),
        "{said}"
    );
    assert!(said.contains("hint:"), "{said}");
    // Nothing was typed: the dialog still waits, and the command did not run.
    std::thread::sleep(Duration::from_secs(1));
    assert!(t.text().contains("Allow execution of"), "{}", t.diag());
    assert!(
        read_or_empty(&w.repo.join("mine.txt")).is_empty() && !w.repo.join("mine.txt").exists()
    );
}
