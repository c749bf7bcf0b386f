//! `spex sessions --all-hosts`: this machine's sessions of every project beside every
//! remote's, which that machine's spex lists (`sessions --json --all-projects` over SSH, every
//! remote at once), with a `HOST` column, attention first across them all. Prints through
//! `cli::output`; a remote that does not answer is named on stderr, its sessions left out.

use std::ffi::OsString;

use serde_json::Value;

use super::table::{self, Scope};
use crate::cli::output::{self, Style};
use crate::env::Env;
use crate::remote::{self, Remote, forward};
use crate::runtime;
use crate::store::session::{Session, attention_first};
use crate::store::sorted::SortedRecord;
use crate::text::visible;

/// One listed session: on which machine, in which project, its record and its JSON.
struct Row {
    /// The remote's name; `None` for this machine.
    host: Option<String>,
    project: String,
    session: Session,
    json: Value,
}

pub fn list(env: &Env, all: bool, json: bool) -> anyhow::Result<()> {
    let remotes = remote::remotes(env)?;
    // Every remote at once, and this machine meanwhile: the slowest decides the time.
    let (local, fetched) = std::thread::scope(|scope| {
        let asks: Vec<_> = remotes
            .iter()
            .map(|r| scope.spawn(move || fetch(env, r, all)))
            .collect();
        let local = table::read(env, &Scope::All, all);
        let fetched: Vec<anyhow::Result<Vec<Row>>> = asks
            .into_iter()
            .map(|a| {
                a.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("the reading thread panicked")))
            })
            .collect();
        (local, fetched)
    });
    let local = local?;
    let mut rows: Vec<Row> = local
        .order
        .iter()
        .map(|k| {
            let (i, s) = &local.rows[*k];
            let record = SortedRecord::new(s, runtime::live(env, &local.stores[*i], s));
            Row {
                host: None,
                project: local
                    .labels
                    .as_ref()
                    .map_or_else(String::new, |l| l[*i].clone()),
                session: s.clone(),
                json: serde_json::to_value(&record).unwrap_or(Value::Null),
            }
        })
        .collect();
    for (r, got) in remotes.iter().zip(fetched) {
        match got {
            Ok(more) => rows.extend(more),
            Err(e) => {
                eprintln!("warning: remote `{}` left out: {e:#}", r.name);
                let hint = e
                    .downcast_ref::<forward::ForwardError>()
                    .and_then(crate::hint::Hint::hint);
                if let Some(hint) = hint {
                    eprintln!("hint: {hint}");
                }
            }
        }
    }
    // Stable: each machine's own order stays where the rule sees no difference.
    rows.sort_by(|a, b| attention_first(&a.session, &b.session));
    if json {
        let out: Vec<Value> = rows
            .into_iter()
            .map(|mut r| {
                if let Value::Object(map) = &mut r.json {
                    map.insert("host".into(), r.host.map_or(Value::Null, Value::String));
                }
                r.json
            })
            .collect();
        output::json(&out);
    } else {
        output::print(&text(env, &rows, all));
    }
    Ok(())
}

/// The sessions `remote` lists of every project there.
fn fetch(env: &Env, remote: &Remote, all: bool) -> anyhow::Result<Vec<Row>> {
    let mut args: Vec<OsString> = ["sessions", "--json", "--all-projects"]
        .iter()
        .map(OsString::from)
        .collect();
    if all {
        args.push("--all".into());
    }
    let (code, out) = forward::output(env, remote, &args)?;
    if code != 0 {
        anyhow::bail!("its `spex sessions --json` exited with {code}");
    }
    let values: Vec<Value> = serde_json::from_slice(&out).map_err(|e| {
        anyhow::anyhow!("its `spex sessions --json` printed no list of sessions ({e})")
    })?;
    values
        .into_iter()
        .map(|json| {
            let session: Session = serde_json::from_value(json.clone())
                .map_err(|e| anyhow::anyhow!("a session it listed is not a record ({e})"))?;
            Ok(Row {
                host: Some(remote.name.clone()),
                project: session.project.file_name().map_or_else(
                    || session.project.display().to_string(),
                    |n| n.to_string_lossy().into_owned(),
                ),
                session,
                json,
            })
        })
        .collect()
}

fn text(env: &Env, rows: &[Row], all: bool) -> String {
    if rows.is_empty() {
        return if all {
            "no sessions on any host\n"
        } else {
            "no live sessions that ran a turn on any host (`--all` shows every record)\n"
        }
        .to_owned();
    }
    let style = Style::detect(env.no_color);
    let mut out = vec![
        ["HOST", "PROJECT"]
            .into_iter()
            .chain(table::HEADER)
            .map(String::from)
            .collect::<Vec<_>>(),
    ];
    for r in rows {
        let mut row = vec![
            visible(r.host.as_deref().unwrap_or("local")),
            visible(&r.project),
        ];
        // A limit's reset is this machine's account's: only its own sessions show one.
        let here = r.host.is_none().then_some(env);
        row.extend(table::cells(here, style, &r.session));
        out.push(row);
    }
    output::table(&out)
}
