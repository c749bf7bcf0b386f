//! The fixed scenarios, each a hosted session of the real harness recorded (`spex launch
//! --record`) and driven through spex's own commands, then judged: what a command answered
//! (launch ready, deliver confirmed), and assertion specs over the recording (the service
//! events in order, how the turn ended), one promise per line.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::line::{Capability, Line};
use super::sandbox::Sandbox;
use crate::adapters::common::check::{CheckKit, Script};
use crate::pty::cassette::Cassette;
use crate::pty::cassette::assertions::{Spec, eval};

/// How long one step may take: a cold harness on a loaded small machine.
const STEP: Duration = Duration::from_mins(1);

/// One scenario being run: its session, and the lines it gave so far.
pub struct Run<'a> {
    pub sb: &'a Sandbox,
    pub kit: &'static dyn CheckKit,
    pub harness: &'static str,
    pub lines: Vec<Line>,
    /// Where the recorded cassettes are copied with `--keep`.
    pub keep: Option<&'a Path>,
}

/// Why a scenario stopped before its end: the line already says what failed.
struct Stopped;

impl Run<'_> {
    fn script(&self) -> &'static Script {
        self.kit.script()
    }

    fn line(
        &mut self,
        scenario: &'static str,
        cap: Capability,
        promise: String,
        result: Result<(), Vec<String>>,
    ) -> bool {
        let ok = result.is_ok();
        self.lines
            .push(Line::judged(scenario, cap, promise, result));
        ok
    }

    /// `spex launch --record --detach`: the session's id; a line when `readiness` says so.
    fn launch(&mut self, scenario: &'static str, readiness: bool) -> Result<String, Stopped> {
        let ran = self.sb.run(&[
            "launch",
            "--harness",
            self.harness,
            "--record",
            "--detach",
            "--json",
        ]);
        let id = ran
            .json()
            .and_then(|v| v["session"]["id"].as_str().map(str::to_owned));
        let ready = id.as_deref().map(|id| {
            self.sb
                .until(id, STEP, |r| r["status"] == "idle")
                .map_err(|r| {
                    vec![
                        format!("the session reads `{}`", r["status"]),
                        self.screen(id),
                    ]
                })
        });
        let result = match (&id, ready) {
            (Some(_), Some(Ok(_))) => Ok(()),
            (Some(_), Some(Err(e))) => Err(e),
            _ => Err(vec![ran.evidence()]),
        };
        if readiness || result.is_err() {
            let ok = self.line(
                scenario,
                Capability::Launch,
                "launch reaches the prompt (no blocking screen)".into(),
                result,
            );
            if !ok {
                if let Some(id) = &id {
                    self.stop(id);
                }
                return Err(Stopped);
            }
        }
        id.ok_or(Stopped)
    }

    fn screen(&self, id: &str) -> String {
        format!("screen:\n{}", self.sb.screen(id))
    }

    /// `spex deliver`: confirmed by the harness's prompt hook.
    fn deliver(
        &mut self,
        scenario: &'static str,
        id: &str,
        prompt: &str,
        line: bool,
    ) -> Result<(), Stopped> {
        let ran = self.sb.run(&["deliver", id, prompt, "--json"]);
        let confirmed = ran.json().is_some_and(|v| v["confirmed"] == true);
        let result = if confirmed {
            Ok(())
        } else {
            Err(vec![ran.evidence(), self.screen(id)])
        };
        if line || result.is_err() {
            let ok = self.line(
                scenario,
                Capability::Deliver,
                "deliver is confirmed by the harness's prompt hook".into(),
                result,
            );
            if !ok {
                self.stop(id);
                return Err(Stopped);
            }
        }
        Ok(())
    }

    /// Waits for the record to read `what`; a failing line (and the session stopped) when it
    /// never does.
    fn wait(
        &mut self,
        scenario: &'static str,
        cap: Capability,
        promise: &str,
        id: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Result<Value, Stopped> {
        match self.sb.until(id, STEP, pred) {
            Ok(r) => Ok(r),
            Err(r) => {
                let evidence = vec![
                    format!(
                        "after {} s the record reads `{}`, turn `{}`",
                        STEP.as_secs(),
                        r["status"],
                        r["turn"]["state"]
                    ),
                    self.screen(id),
                ];
                self.line(scenario, cap, promise.to_owned(), Err(evidence));
                self.stop(id);
                Err(Stopped)
            }
        }
    }

    fn stop(&self, id: &str) {
        let _ = self.sb.run(&["stop", id, "--json", "--grace", "2"]);
    }

    /// Stops the session, waits for its recording to end and judges each promise's spec
    /// against it.
    fn judge(
        &mut self,
        scenario: &'static str,
        id: &str,
        promises: Vec<(Capability, String, Value)>,
    ) {
        std::thread::sleep(Duration::from_millis(500));
        self.stop(id);
        let dir = self.sb.session_dir(id).map(|d| d.join("cassette"));
        let ended = dir.as_deref().is_some_and(|d| {
            let deadline = std::time::Instant::now() + STEP;
            while !d.join("final.json").is_file() {
                if std::time::Instant::now() >= deadline {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            true
        });
        let recorded = match (dir, ended) {
            (Some(dir), true) => load(&dir).map(|(c, f)| (dir, c, f)),
            _ => Err("the recording never ended".to_owned()),
        };
        if let (Some(keep), Ok((dir, ..))) = (self.keep, &recorded) {
            let _ = copy_dir(dir, &keep.join(self.harness).join(scenario));
        }
        for (cap, promise, assertions) in promises {
            let result = match &recorded {
                Ok((dir, cassette, fin)) => judge_one(dir, cassette, fin, &assertions),
                Err(e) => Err(vec![e.clone()]),
            };
            self.line(scenario, cap, promise, result);
        }
    }

    /// A turn with a tool call; launch readiness and delivery are judged here.
    pub fn tool(&mut self) -> Option<String> {
        let s = self.script();
        let sandbox = crate::adapters::common::check::Sandbox {
            home: &self.sb.home,
            repo: &self.sb.repo,
        };
        let _ = self.kit.tool_unasked(&sandbox, true);
        let id = self.launch("tool", true).ok()?;
        let result = self.tool_turn("tool", &id, s.tool);
        let _ = self.kit.tool_unasked(&sandbox, false);
        result.ok()?;
        self.judge("tool", &id, vec![
            (Capability::Events, "dispatch decodes the tool turn: tool started, tool completed".into(),
                json!([{"assert": "service_events", "in_order": [{"kind": "turn.started", "prompt": s.tool}, {"kind": "tool.started"}, {"kind": "tool.completed"}, {"kind": "turn.completed"}]}])),
            (Capability::Events, "the record reads working, then idle, completed".into(),
                json!([{"assert": "service_events", "in_order": [{"kind": "turn.started"}, {"kind": "turn.completed"}]}, {"assert": "outcome", "is": "completed"}])),
        ]);
        Some(id)
    }

    fn tool_turn(&mut self, scenario: &'static str, id: &str, prompt: &str) -> Result<(), Stopped> {
        self.deliver(scenario, id, prompt, scenario == "tool")?;
        let promise = "the turn ends completed";
        self.wait(scenario, Capability::Events, promise, id, |r| {
            r["status"] == "idle" && r["turn"]["state"] == "completed"
        })?;
        Ok(())
    }

    /// A permission dialog, answered with `spex approve`.
    pub fn permission(&mut self) -> Option<()> {
        let s = self.script();
        let via = s.permission_via;
        let id = self.launch("permission", false).ok()?;
        self.deliver("permission", &id, s.permission, false).ok()?;
        let asks = format!(
            "a permission dialog opens an attention naming the command, through the {}",
            via_words(via, s.permission_source)
        );
        let mut opened = json!({"kind": "attention.opened", "attention_kind": "permission", "via": {"how": via}});
        if let Some(source) = s.permission_source {
            opened["source"] = source.into();
        }
        let r = self
            .wait(
                "permission",
                Capability::AnswerPermission,
                &asks,
                &id,
                |r| r["status"] == "needs_attention",
            )
            .ok()?;
        let a = &r["attention"];
        let named =
            a["kind"] == "permission" && a["text"].as_str().is_some_and(|t| !t.trim().is_empty());
        let ran = self.sb.run(&["approve", &id, "--json"]);
        let approved = ran.ok;
        let done = self.sb.until(&id, STEP, |r| {
            r["status"] == "idle" && r["turn"]["state"] == "completed"
        });
        let mut promises = vec![(
            Capability::AnswerPermission,
            asks.clone(),
            json!([{"assert": "service_events", "in_order": [{"kind": "tool.started"}, opened]}]),
        )];
        if !named {
            self.line(
                "permission",
                Capability::AnswerPermission,
                format!("{asks} (the attention's text)"),
                Err(vec![format!("attention: {a}")]),
            );
        }
        let answer = "`spex approve` answers it through spex's path and the tool runs".to_owned();
        if approved && done.is_ok() {
            promises.push((Capability::AnswerPermission, answer,
                // The closing may be journaled after the tool's completion, when the hook that
                // reports it also closes the answered attention (seen with Codex under load).
                json!([{"assert": "service_events", "in_order": [{"kind": "attention.closed", "attention_kind": "permission", "choice": "allow", "how": "spex answer"}, {"kind": "turn.completed"}]}, {"assert": "service_events", "in_order": [{"kind": "tool.completed"}, {"kind": "turn.completed"}]}, {"assert": "outcome", "is": "completed"}])));
        } else {
            let mut evidence = vec![ran.evidence()];
            if let Err(r) = &done {
                evidence.push(format!(
                    "the record reads `{}`, turn `{}`",
                    r["status"], r["turn"]["state"]
                ));
            }
            evidence.push(self.screen(&id));
            self.line(
                "permission",
                Capability::AnswerPermission,
                answer,
                Err(evidence),
            );
        }
        self.judge("permission", &id, promises);
        Some(())
    }

    /// A question with options, answered with `spex answer`.
    pub fn question(&mut self) -> Option<()> {
        let (prompt, choice) = match self.script().question {
            Ok(q) => q,
            Err(why) => {
                self.lines.push(Line::unchecked(
                    "question",
                    Capability::AnswerQuestion,
                    "a question opens an attention with its options; `spex answer` answers it"
                        .into(),
                    why,
                ));
                return None;
            }
        };
        let id = self.launch("question", false).ok()?;
        self.deliver("question", &id, prompt, false).ok()?;
        let asks = "a question opens an attention with its options";
        let r = self
            .wait("question", Capability::AnswerQuestion, asks, &id, |r| {
                r["status"] == "needs_attention"
            })
            .ok()?;
        let a = r["attention"].clone();
        let answered = self.sb.run(&["answer", &id, choice, "--json"]);
        let done = self.sb.until(&id, STEP, |r| {
            r["status"] == "idle" && r["turn"]["state"] == "completed"
        });
        let with_options = a["kind"] == "question" && a.to_string().contains("options");
        if !with_options {
            self.line(
                "question",
                Capability::AnswerQuestion,
                format!("{asks} (the attention's options)"),
                Err(vec![format!("attention: {a}")]),
            );
        }
        let answer = "`spex answer` picks an option and the turn completes".to_owned();
        let mut promises = vec![(
            Capability::AnswerQuestion,
            asks.to_owned(),
            json!([{"assert": "service_events", "in_order": [{"kind": "turn.started"}, {"kind": "attention.opened", "attention_kind": "question"}]}]),
        )];
        if answered.ok && done.is_ok() {
            promises.push((Capability::AnswerQuestion, answer,
                json!([{"assert": "service_events", "in_order": [{"kind": "attention.closed", "attention_kind": "question", "how": "spex answer"}, {"kind": "turn.completed"}]}])));
        } else {
            let evidence = vec![answered.evidence(), self.screen(&id)];
            self.line(
                "question",
                Capability::AnswerQuestion,
                answer,
                Err(evidence),
            );
        }
        self.judge("question", &id, promises);
        Some(())
    }

    /// A turn interrupted with `spex interrupt` while the model still answers.
    pub fn interrupt(&mut self) -> Option<()> {
        let (prompt, shows) = self.script().slow;
        let id = self.launch("interrupt", false).ok()?;
        self.deliver("interrupt", &id, prompt, false).ok()?;
        let promise = "`spex interrupt` stops the turn and it reads interrupted";
        self.wait("interrupt", Capability::Interrupt, promise, &id, |r| {
            r["status"] == "working"
        })
        .ok()?;
        let deadline = std::time::Instant::now() + STEP;
        while !self.sb.screen(&id).contains(shows) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        // Well into the turn: an interrupt key right as the turn starts can be taken for typing.
        std::thread::sleep(Duration::from_secs(2));
        let ran = self.sb.run(&["interrupt", &id, "--json"]);
        if !ran.ok {
            self.line(
                "interrupt",
                Capability::Interrupt,
                promise.to_owned(),
                Err(vec![ran.evidence(), self.screen(&id)]),
            );
            self.stop(&id);
            return None;
        }
        self.wait("interrupt", Capability::Interrupt, promise, &id, |r| {
            r["status"] == "idle" && r["turn"]["state"] == "interrupted"
        })
        .ok()?;
        self.judge("interrupt", &id, vec![(Capability::Interrupt, promise.to_owned(),
            json!([{"assert": "service_events", "in_order": [{"kind": "turn.started"}, {"kind": "turn.interrupted", "by": "spex interrupt"}]}, {"assert": "outcome", "is": "interrupted"}]))]);
        Some(())
    }

    /// A turn whose model request fails.
    pub fn failed(&mut self) -> Option<()> {
        let prompt = self.script().fail;
        let id = self.launch("failed", false).ok()?;
        self.deliver("failed", &id, prompt, false).ok()?;
        let promise = "a failed model request reads failed, with an attention";
        self.wait("failed", Capability::Events, promise, &id, |r| {
            r["turn"]["state"] == "failed"
        })
        .ok()?;
        self.judge("failed", &id, vec![(Capability::Events, promise.to_owned(),
            json!([{"assert": "service_events", "in_order": [{"kind": "turn.started"}, {"kind": "turn.failed"}, {"kind": "attention.opened", "reason": "turn_failed"}]}, {"assert": "outcome", "is": "failed"}]))]);
        Some(())
    }

    /// The tool scenario's session resumed with `spex resume`, and a turn in it.
    pub fn resume(&mut self, id: Option<&str>) -> Option<()> {
        let Some(id) = id else {
            self.line(
                "resume",
                Capability::Resume,
                "`spex resume` brings an exited session back and a turn runs in it".into(),
                Err(vec!["the tool scenario left no session to resume".into()]),
            );
            return None;
        };
        let promise = "`spex resume` brings an exited session back and a turn runs in it";
        let ran = self
            .sb
            .run(&["resume", id, "--detach", "--json", "--ready-timeout", "60"]);
        let new = ran
            .json()
            .and_then(|v| v["session"]["id"].as_str().map(str::to_owned));
        let Some(new) = new.filter(|_| ran.ok) else {
            self.line(
                "resume",
                Capability::Resume,
                promise.into(),
                Err(vec![ran.evidence()]),
            );
            return None;
        };
        let turn = self
            .deliver("resume", &new, self.script().plain, false)
            .and_then(|()| {
                self.wait("resume", Capability::Resume, promise, &new, |r| {
                    r["status"] == "idle" && r["turn"]["state"] == "completed"
                })
                .map(|_| ())
            });
        if turn.is_ok() {
            self.line("resume", Capability::Resume, promise.into(), Ok(()));
            self.stop(&new);
        }
        Some(())
    }
}

impl Run<'_> {
    /// The turns that fire the bound hooks no other scenario fires, one after the other in a
    /// session of their own; a line only when one does not complete (the hooks are judged
    /// across every scenario, after them).
    pub fn hooks(&mut self) -> Option<()> {
        let prompts = self.script().hooks;
        if prompts.is_empty() {
            return Some(());
        }
        let sandbox = crate::adapters::common::check::Sandbox {
            home: &self.sb.home,
            repo: &self.sb.repo,
        };
        let _ = self.kit.hooks_turns(&sandbox, true);
        let turns = self.hook_turns(prompts);
        let _ = self.kit.hooks_turns(&sandbox, false);
        turns
    }

    fn hook_turns(&mut self, prompts: &[&str]) -> Option<()> {
        let id = self.launch("hooks", false).ok()?;
        for prompt in prompts {
            self.deliver("hooks", &id, prompt, false).ok()?;
            let promise = format!(
                "the turn `{prompt}` (for the hooks no other scenario fires) ends completed"
            );
            self.wait("hooks", Capability::Events, &promise, &id, |r| {
                r["status"] == "idle" && r["turn"]["state"] == "completed"
            })
            .ok()?;
        }
        // A hook a harness fires a moment after the turn (an idle notice) has its time.
        std::thread::sleep(Duration::from_secs(2));
        self.stop(&id);
        Some(())
    }
}

/// How an attention reaches spex, in words.
fn via_words(via: &str, source: Option<&str>) -> String {
    match (via, source) {
        ("hook", Some(event)) => format!("permission hook (`{event}`)"),
        ("hook", None) => "permission hook".to_owned(),
        ("server", _) => "harness's app server".to_owned(),
        _ => "screen (the dialog's keys)".to_owned(),
    }
}

fn load(dir: &Path) -> Result<(Cassette, Value), String> {
    let cassette = Cassette::open(dir).map_err(|e| crate::hint::spelled(&e))?;
    let fin = fs_err::read_to_string(dir.join("final.json"))
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))?;
    Ok((cassette, fin))
}

/// Judges `assertions` (a spec's list) against the recording: bound to it, since the spec is
/// spex's own and the recording new.
fn judge_one(
    dir: &Path,
    cassette: &Cassette,
    fin: &Value,
    assertions: &Value,
) -> Result<(), Vec<String>> {
    let spec = json!({
        "cassette": {"id": cassette.manifest.id, "content_digest": cassette.manifest.content_digest.clone().unwrap_or_default()},
        "assertions": assertions,
    });
    let spec =
        Spec::parse(&spec.to_string(), Path::new("spex check")).map_err(|e| vec![e.to_string()])?;
    let report = eval::judge(dir, cassette, fin, &spec);
    if let Some(b) = report.binding {
        return Err(vec![b]);
    }
    if report.failures.is_empty() {
        return Ok(());
    }
    Err(report
        .failures
        .iter()
        .map(|f| {
            let events: Vec<String> = f.events.iter().map(Value::to_string).collect();
            format!(
                "{}\nscreen at {} ms:\n{}\nevents near it:\n{}",
                f.message,
                f.t_ms,
                f.excerpt.join("\n"),
                events.join("\n")
            )
        })
        .collect())
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    fs_err::create_dir_all(to)?;
    for entry in fs_err::read_dir(from)? {
        let entry = entry?;
        fs_err::copy(entry.path(), to.join(entry.file_name()))?;
    }
    Ok(())
}
