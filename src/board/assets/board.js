// spex board: every session of every project, live over one WebSocket. All session text is
// set with textContent (never as HTML). No input path to a session's terminal exists here.
"use strict";

(function () {
  const csrf = document.querySelector('meta[name="spex-csrf"]').content;
  const groups = ["needs_you", "working", "idle", "exited"];
  const sessions = new Map(); // key -> view
  const cards = new Map(); // key -> li
  let cursor = null;
  let socket = null;
  let retry = 500;
  let screenOf = null; // the session whose screen is shown
  const inView = new Set(); // keys of the cards in the viewport
  let told = null; // the sessions last said to be shown, as JSON
  let focusOn = null; // the session a link opened (`#session=<key>`), until it is shown

  // Control characters shown as the CLI shows them (`\e[31m`), never sent to the screen raw.
  function visible(t) {
    return String(t).replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, (c) =>
      c === "\u001b" ? "\\e" : "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0"));
  }

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("data-") || k === "type" || k === "name" || k === "value" || k === "for" || k === "id" || k === "aria-label" || k === "placeholder" || k === "rows") e.setAttribute(k, v);
      else if (k === "class") e.className = v;
    }
    if (text !== undefined && text !== null) e.textContent = visible(text);
    return e;
  }

  function setConn(state) {
    const c = document.getElementById("conn");
    c.dataset.state = state;
    c.textContent = state === "open" ? "live" : state;
  }

  function connect() {
    setConn("connecting");
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    let url = proto + "//" + location.host + "/ws?csrf=" + encodeURIComponent(csrf);
    if (cursor) url += "&cursor=" + encodeURIComponent(cursor);
    socket = new WebSocket(url);
    socket.onopen = () => { retry = 500; setConn("open"); told = null; tellViewing(); if (screenOf) watchScreen(screenOf); };
    socket.onclose = () => { setConn("closed"); setTimeout(connect, retry); retry = Math.min(retry * 2, 10000); };
    socket.onmessage = (m) => {
      let msg;
      try { msg = JSON.parse(m.data); } catch (_) { return; }
      receive(msg);
    };
  }

  // The harnesses' rate limits, one line each as `spex sessions` prints them; a reached one
  // marked.
  function limits(list) {
    const p = document.getElementById("limits");
    if (!p || !Array.isArray(list)) return;
    p.textContent = "";
    for (const l of list) {
      const span = el("span", { class: "limit", "data-known": String(l.known), "data-reached": String(l.reached) }, l.line);
      p.appendChild(span);
    }
    // Nothing known anywhere: no line (`spex limits` says why each is unknown).
    p.hidden = !list.some((l) => l.known);
  }

  function receive(msg) {
    if (msg.limits) limits(msg.limits);
    if (msg.type === "snapshot") {
      const keep = new Set();
      for (const s of msg.sessions) { sessions.set(s.key, s); keep.add(s.key); }
      for (const k of Array.from(sessions.keys())) if (!keep.has(k)) { sessions.delete(k); const c = cards.get(k); if (c) { seen.unobserve(c); c.remove(); } cards.delete(k); inView.delete(k); }
      setCursor(msg.cursor);
      renderAll();
      focus();
    } else if (msg.type === "change") {
      for (const s of msg.sessions) sessions.set(s.key, s);
      setCursor(msg.cursor);
      for (const s of msg.sessions) render(s);
      order();
      if (focusOn) focus();
    } else if (msg.type === "receipt") {
      receipt(msg);
    } else if (msg.type === "screen") {
      screen(msg);
    } else if (msg.type === "resync") {
      setCursor(msg.cursor);
      if (socket) socket.close();
    }
  }

  function setCursor(c) {
    cursor = c;
    document.body.dataset.cursor = c;
  }

  function renderAll() {
    for (const s of sessions.values()) render(s);
    order();
  }

  // Sessions in their groups; needs-you oldest attention first, the others latest change first.
  function order() {
    const counts = {};
    for (const g of groups) {
      const list = document.querySelector('section[data-group="' + g + '"] ul');
      const inGroup = Array.from(sessions.values()).filter((s) => s.group === g);
      inGroup.sort((a, b) => g === "needs_you"
        ? String((a.attention || {}).since || a.since).localeCompare(String((b.attention || {}).since || b.since))
        : String(b.updated_at).localeCompare(String(a.updated_at)));
      for (const s of inGroup) list.appendChild(cards.get(s.key));
      counts[g] = inGroup.length;
      document.querySelector('[data-count="' + g + '"]').textContent = String(inGroup.length);
    }
    document.getElementById("empty").hidden = sessions.size > 0;
    document.getElementById("counts").textContent = counts.needs_you ? counts.needs_you + " need you" : "";
  }

  function render(s) {
    let li = cards.get(s.key);
    if (!li) {
      li = build(s);
      cards.set(s.key, li);
    }
    li.dataset.status = s.status;
    li.dataset.group = s.group;
    const f = (name) => li.querySelector('[data-field="' + name + '"]');
    const set = (name, text) => { f(name).textContent = visible(text || ""); };
    set("label", s.name && s.handle ? s.handle + " · " + s.name : s.label);
    set("harness", s.harness);
    // A session of another machine: its host, and "stale" while the host does not answer (its
    // state is the last one heard, never shown as live).
    set("host", s.host ? s.host + (s.stale ? " · stale" : "") : "");
    f("host").hidden = !s.host;
    if (s.stale) li.dataset.stale = ""; else delete li.dataset.stale;
    if (s.stale && s.unreachable) {
      set("evidence", "unreachable since " + clock(s.unreachable.since) + ": " + s.unreachable.error);
    }
    set("project", s.project);
    set("branch", s.branch || "");
    f("branch").hidden = !s.branch;
    set("headline", s.headline || "");
    set("state", s.status.replace("_", " ") + (s.since ? " since " + clock(s.since) : ""));
    if (!(s.stale && s.unreachable)) set("evidence", [s.source, s.why || s.exit_reason].filter(Boolean).join(": "));
    set("turn", s.turn_phrase || (s.turn ? s.turn.state : ""));
    // A turn refused by a rate limit: when the limit resets, as the harness reported it.
    set("limit", s.limit_resets_at ? "limit reached; resets " + clock(s.limit_resets_at) + " (" + until(s.limit_resets_at) + ")" : "");
    f("limit").hidden = !s.limit_resets_at;
    set("unverified", s.state_unverified ? "state unverified: " + s.state_unverified : "");
    f("unverified").hidden = !s.state_unverified;
    set("tree", s.tree);
    const u = s.usage;
    f("usage").textContent = u ? "tokens in " + u.input + " (cached " + u.cached + ") out " + u.output : "";
    attention(li, s);
    // A stale session is acted on once its host answers again.
    const live = s.status !== "exited" && !s.stale;
    li.querySelector('[data-action="interrupt"]').hidden = !(live && s.turn && s.turn.state === "running");
    li.querySelector('[data-action="stop"]').hidden = !live;
    li.querySelector('[data-action="resume"]').hidden = live || !!s.stale;
    li.querySelector(".deliver").hidden = !live;
    for (const a of ["screen", "diff", "open"]) li.querySelector('[data-action="' + a + '"]').hidden = !!s.host;
  }

  // `in 1h 12m`, `in 3d 4h`, `now` for a time passed (as `spex show` says it).
  function until(t) {
    const mins = Math.ceil((new Date(t) - Date.now()) / 60000);
    if (isNaN(mins) || mins <= 0) return "now";
    const d = Math.floor(mins / 1440), h = Math.floor(mins % 1440 / 60), m = mins % 60;
    if (d) return "in " + d + "d" + (h ? " " + h + "h" : "");
    return "in " + (h ? h + "h" + (m ? " " + m + "m" : "") : m + "m");
  }

  function clock(t) {
    const d = new Date(t);
    return isNaN(d) ? t : d.toLocaleTimeString();
  }

  function build(s) {
    const li = el("li", { class: "session", "data-session": s.key, "data-harness": s.harness, "data-project": s.project_key });
    seen.observe(li);
    const title = el("div", { class: "title" });
    title.append(el("span", { "data-field": "label" }), el("span", { class: "tag", "data-field": "host" }),
      el("span", { class: "tag", "data-field": "harness" }),
      el("span", { class: "tag", "data-field": "project" }), el("span", { class: "tag", "data-field": "branch" }));
    li.append(title, el("p", { "data-field": "headline" }));
    const meta = el("div", { class: "meta" });
    meta.append(el("div", { "data-field": "state" }), el("div", { "data-field": "evidence" }),
      el("div", { "data-field": "turn" }), el("div", { class: "limit-reset", "data-field": "limit" }),
      el("div", { class: "unverified", "data-field": "unverified" }),
      el("div", { "data-field": "usage" }), el("div", { "data-field": "tree" }));
    li.append(meta, el("div", { class: "attention", "data-attention": "" }));
    li.querySelector(".attention").hidden = true;

    const deliver = el("form", { class: "deliver" });
    const prompt = el("textarea", { "data-field": "prompt", rows: "2", "aria-label": "Prompt for " + s.label, placeholder: "Prompt to deliver" });
    const send = el("button", { type: "submit", "data-action": "deliver" }, "Deliver");
    deliver.append(prompt, el("div", { class: "controls" }));
    deliver.lastChild.append(send);
    deliver.addEventListener("submit", (e) => {
      e.preventDefault();
      if (!prompt.value.trim()) return;
      const request = Math.random().toString(36).slice(2);
      li.querySelector('[data-field="receipt"]').dataset.request = request;
      act(li, "deliver", { session: s.key, text: prompt.value, request }).then((ok) => { if (ok) prompt.value = ""; });
    });
    const controls = el("div", { class: "controls" });
    for (const [a, label] of [["interrupt", "Interrupt"], ["stop", "Stop"], ["resume", "Resume"], ["screen", "Screen"], ["diff", "Diff"], ["open", "Open"]]) {
      const b = el("button", { type: "button", "data-action": a }, label);
      b.addEventListener("click", () => {
        if (a === "screen") return toggleScreen(li, s.key);
        if (a === "diff") return showDiff(li, s.key);
        if (a === "stop" && !confirm("Stop " + (sessions.get(s.key) || s).label + "?")) return;
        act(li, a, { session: s.key });
      });
      controls.append(b);
    }
    const diff = el("div", { "data-field": "diff" });
    diff.hidden = true;
    li.append(deliver, controls, el("div", { "data-field": "receipt" }), el("div", { "data-field": "result" }), diff);
    const pre = el("pre", { "data-field": "screen" });
    pre.hidden = true;
    li.append(pre);
    return li;
  }

  // The open attention with its real choices; rebuilt only when another attention opens.
  function attention(li, s) {
    const box = li.querySelector(".attention");
    const a = s.status === "needs_attention" ? s.attention : null;
    const id = a ? a.id || "" : "";
    if (box.dataset.attention === id && (a !== null) === !box.hidden) return;
    box.replaceChildren();
    box.dataset.attention = id;
    box.hidden = !a;
    if (!a) return;
    box.append(el("p", { "data-field": "question" }, a.text));
    if (a.tool) box.append(el("div", { class: "meta", "data-field": "tool" }, a.tool));
    const message = el("textarea", { "data-field": "message", rows: "1", "aria-label": "Message for the agent", placeholder: "Message for the agent (with deny)" });
    const questions = a.questions || [];
    if (questions.length) {
      const form = el("form", { "data-field": "questions" });
      questions.forEach((q, i) => {
        const fs = el("fieldset", { "data-question": String(i) });
        fs.append(el("legend", {}, q.header ? q.header + ": " + q.question : q.question));
        for (const o of q.options || []) {
          const label = el("label");
          const input = el("input", { type: q.multi_select ? "checkbox" : "radio", name: "q" + i, value: o, "data-option": o });
          label.append(input, document.createTextNode(" " + o));
          fs.append(label);
        }
        if (q.free_text) fs.append(el("input", { type: "text", "data-free-text": String(i), "aria-label": "Your own answer", placeholder: "Or your own answer" }));
        form.append(fs);
      });
      const row = el("div", { class: "choices" });
      row.append(el("button", { type: "submit", "data-action": "answer-questions" }, "Answer"));
      const deny = el("button", { type: "button", "data-action": "answer", "data-choice": "deny" }, "Deny");
      deny.addEventListener("click", () => answer(li, s, a, ["deny"], message.value));
      row.append(deny);
      form.append(row);
      form.addEventListener("submit", (e) => {
        e.preventDefault();
        const picked = questions.map((q, i) => {
          const fs = form.querySelector('[data-question="' + i + '"]');
          const free = fs.querySelector("[data-free-text]");
          if (free && free.value.trim()) return free.value.trim();
          return Array.from(fs.querySelectorAll("input[data-option]:checked")).map((x) => x.value).join(",");
        });
        if (picked.some((p) => !p)) return result(li, false, "answer every question");
        answer(li, s, a, picked, "");
      });
      box.append(form, message);
      return;
    }
    const row = el("div", { class: "choices" });
    for (const c of a.choices || []) {
      const b = el("button", { type: "button", "data-action": "answer", "data-choice": c.id }, c.label || c.id);
      b.addEventListener("click", () => answer(li, s, a, [c.id], c.message ? message.value : ""));
      row.append(b);
    }
    box.append(row);
    if ((a.choices || []).some((c) => c.message)) box.append(message);
  }

  function answer(li, s, a, choices, message) {
    return act(li, "answer", { session: s.key, attention: a.id, choices, message });
  }

  function result(li, ok, text) {
    const r = li.querySelector('[data-field="result"]');
    r.dataset.ok = String(ok);
    r.textContent = visible(text);
  }

  // An action whose reply the caller shows itself; null (the error shown) when refused.
  async function post(li, name, body) {
    result(li, true, name + "…");
    try {
      const r = await fetch("/api/" + name, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-Spex-Csrf": csrf },
        body: JSON.stringify(body),
      });
      const v = await r.json();
      if (!v.ok) { result(li, false, v.error || "refused"); return null; }
      result(li, true, "");
      return v;
    } catch (e) {
      result(li, false, String(e));
      return null;
    }
  }

  async function act(li, name, body) {
    for (const b of li.querySelectorAll("button")) b.disabled = true;
    result(li, true, name + "…");
    try {
      const r = await fetch("/api/" + name, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-Spex-Csrf": csrf },
        body: JSON.stringify(body),
      });
      let v = {};
      try { v = await r.json(); } catch (_) { v = { ok: false, error: r.status + " " + r.statusText }; }
      if (v.ok) {
        const a = v.answered;
        result(li, true, a ? "answered " + a.choice + " (" + a.confirmed + ")" : name + ": done");
        if (v.delivery) receipt({ request: body.request, session: body.session, stages: v.delivery.stages });
      } else {
        result(li, false, v.error || "refused");
      }
      return !!v.ok;
    } catch (e) {
      result(li, false, String(e));
      return false;
    } finally {
      for (const b of li.querySelectorAll("button")) b.disabled = false;
    }
  }

  function receipt(msg) {
    const li = cards.get(msg.session);
    if (!li) return;
    const r = li.querySelector('[data-field="receipt"]');
    if (msg.request && r.dataset.request && r.dataset.request !== msg.request) return;
    const stages = msg.stages || [];
    const last = stages.length ? stages[stages.length - 1].stage : "";
    if (r.dataset.stage === "done" && last !== "done") return;
    r.dataset.stage = last;
    r.textContent = "delivery: " + stages.map((x) => x.stage + " " + x.elapsed_ms + " ms").join(" → ") + (msg.outcome ? " (" + msg.outcome + ")" : "");
  }

  // The session's changes since its base commit, one element per file, each patch as text.
  async function showDiff(li, key) {
    const box = li.querySelector('[data-field="diff"]');
    if (!box.hidden) { box.hidden = true; box.replaceChildren(); return; }
    const v = await post(li, "diff", { session: key });
    if (!v) return;
    box.replaceChildren();
    box.hidden = false;
    const files = v.files || [];
    if (!files.length) box.append(el("p", { class: "meta" }, "no changes since " + String(v.base || "").slice(0, 12)));
    for (const f of files) {
      const d = el("details", { "data-file": f.path, "data-status": f.status, "data-touched": String(!!f.touched_by_session) });
      const lines = f.binary ? "binary" : "+" + f.added + " −" + f.removed;
      d.append(el("summary", {}, (f.touched_by_session ? "* " : "") + f.path + " (" + f.status + ", " + lines + ")"));
      const open = el("button", { type: "button", "data-action": "open", "data-file": f.path }, "Open in editor");
      open.addEventListener("click", () => act(li, "open", { session: key, file: f.path }));
      d.append(open, el("pre", { "data-field": "patch" }, f.patch || f.error || ""));
      box.append(d);
    }
  }

  function toggleScreen(li, key) {
    const pre = li.querySelector('pre[data-field="screen"]');
    if (screenOf === key) {
      screenOf = null;
      pre.hidden = true;
      watchScreen(null);
      return;
    }
    for (const p of document.querySelectorAll('pre[data-field="screen"]')) p.hidden = true;
    screenOf = key;
    pre.hidden = false;
    pre.textContent = "…";
    watchScreen(key);
  }

  function watchScreen(key) {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "screen", session: key }));
  }

  function screen(msg) {
    const li = cards.get(msg.session);
    if (!li || msg.session !== screenOf) return;
    const pre = li.querySelector('pre[data-field="screen"]');
    pre.textContent = visible(msg.error ? msg.error : (msg.lines || []).join("\n"));
  }

  // The sessions this page shows a person: cards at least half in the viewport (or filling a
  // third of it), while the page is visible (Page Visibility API). The board keeps the
  // notifier's marker for each, so nothing is sent about a session being looked at.
  const seen = new IntersectionObserver((entries) => {
    for (const e of entries) {
      const k = e.target.dataset.session;
      if (e.isIntersecting && (e.intersectionRatio >= 0.5 || e.intersectionRect.height >= window.innerHeight / 3)) inView.add(k);
      else inView.delete(k);
    }
    tellViewing();
  }, { threshold: [0, 0.25, 0.5, 0.75, 1] });

  function tellViewing() {
    const list = document.visibilityState === "visible" ? Array.from(inView).sort() : [];
    const text = JSON.stringify(list);
    document.body.dataset.viewing = text;
    if (text === told || !socket || socket.readyState !== WebSocket.OPEN) return;
    socket.send(JSON.stringify({ type: "viewing", sessions: list }));
    told = text;
  }
  document.addEventListener("visibilitychange", tellViewing);
  // Said again while it holds, so a page whose network is gone stops counting (the board's
  // `viewing::REFRESH`); a hidden page says nothing.
  setInterval(() => { if (inView.size && document.visibilityState === "visible") { told = null; tellViewing(); } }, 10000);

  // A notification's view link opens the board at one session: `#session=<key>`.
  function focus() {
    const m = /^#session=(.+)$/.exec(location.hash);
    if (m) focusOn = decodeURIComponent(m[1]);
    if (!focusOn) return;
    const li = cards.get(focusOn);
    if (!li) return;
    for (const c of document.querySelectorAll("li.session.focused")) c.classList.remove("focused");
    li.classList.add("focused");
    li.scrollIntoView({ block: "center" });
    focusOn = null;
  }
  window.addEventListener("hashchange", focus);

  connect();
})();
