// The nerflow dashboard: hash-routed pages over the JSON API. Everything
// the API returns is inserted as text (never as HTML). The session cookie
// set by the login page authenticates the calls.
"use strict";

(function () {
  const view = document.getElementById("view");
  let timer = null;     // the current page's refresh
  let info = {};        // which parts this server has (GET /api/v1/info)

  // h builds an element: h("td", {class: "num"}, "text", child, ...).
  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const kid of kids.flat()) {
      if (kid === undefined || kid === null || kid === false) continue;
      e.appendChild(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return e;
  }

  async function api(path, opts) {
    const res = await fetch(path, Object.assign({ credentials: "same-origin", headers: { "Content-Type": "application/json" } }, opts));
    if (res.status === 401) { location.href = "/login"; throw new Error("signed out"); }
    const body = res.headers.get("Content-Type")?.includes("json") ? await res.json() : await res.text();
    if (!res.ok) throw new Error((body && body.error) || `${res.status} ${res.statusText}`);
    return body;
  }

  // shown is a node's state as people should see it: a running node whose
  // worker died is "lost" (it waits to be re-run), a node back in the queue
  // after an attempt is "requeued".
  function shown(n) {
    if (n.state === "running" && n.lost) return "lost";
    if ((n.state === "queued" || n.state === "pending") && n.attempt > 0) return "requeued";
    return n.state;
  }
  const stateText = s => ({ lost: "worker lost", requeued: "re-queued" })[s] || s;
  const badge = state => h("span", { class: `badge ${state}` }, stateText(state));
  const fmtTime = t => t ? new Date(t).toLocaleString() : "";
  function fmtDur(ms) {
    if (!(ms >= 0)) return "";
    const s = Math.round(ms / 1000);
    if (s < 60) return `${s}s`;
    if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
    return `${Math.floor(s / 3600)}h ${Math.floor(s % 3600 / 60)}m`;
  }
  const runDur = r => fmtDur((r.finished_at ? new Date(r.finished_at) : new Date()) - new Date(r.created_at));
  // gain prints a difference of two F1 scores in points, signed.
  // Scores are shown as percentages with two decimals, as the CLI prints
  // them (48.73, not 0.4873); sizes in binary units, as the CLI's.
  const pct = v => typeof v === "number" ? (100 * v).toFixed(2) : "";
  const gain = v => (v >= 0 ? "+" : "") + pct(v);
  function fmtBytes(n) {
    if (typeof n !== "number") return "";
    if (n < 1024) return `${n} B`;
    const units = ["KiB", "MiB", "GiB", "TiB"];
    let u = -1;
    do { n /= 1024; u++; } while (n >= 1024 && u < units.length - 1);
    return `${n < 10 ? n.toFixed(1) : Math.round(n)} ${units[u]}`;
  }
  const enc = encodeURIComponent;
  const fileURL = (run, node, out, file, dl) =>
    `/api/v1/runs/${enc(run)}/nodes/${enc(node)}/outputs/${enc(out)}/files/${file.split("/").map(enc).join("/")}${dl ? "?download=1" : ""}`;

  function show(...kids) { view.replaceChildren(...kids); }
  function problem(err) { return h("p", { class: "error" }, String(err.message || err)); }
  function every(ms, f) { f(); timer = setInterval(f, ms); }

  // ---- runs -------------------------------------------------------------
  // runsPage lists the runs, newest first, a page at a time, filtered by
  // state and by the schedule that submitted them, and searched by id or
  // pipeline name.
  function runsPage() {
    const PAGE = 25;
    const table = h("tbody");
    const status = h("div");
    const form = submitForm();
    const search = h("input", { id: "run-search", type: "search", placeholder: "search run or pipeline", size: 28, oninput: () => { page = 0; render(); } });
    const state = h("select", { id: "run-state", onchange: () => { page = 0; render(); } },
      ["all states", "running", "succeeded", "failed", "cancelled"].map(v => h("option", { value: v.startsWith("all") ? "" : v }, v)));
    const sched = h("select", { id: "run-schedule", onchange: () => { page = 0; render(); } });
    const where = h("span", { class: "muted", id: "run-page" });
    const prev = h("button", { class: "plain", id: "run-prev", onclick: () => { page--; render(); } }, "‹ Newer");
    const next = h("button", { class: "plain", id: "run-next", onclick: () => { page++; render(); } }, "Older ›");
    show(h("div", { class: "toolbar" }, h("h1", {}, "Runs"), h("span", { class: "spacer" }),
      h("button", { class: "plain", onclick: () => form.hidden = !form.hidden }, "Submit a run")),
      form, status, h("div", { class: "toolbar" }, search, state, sched, h("span", { class: "spacer" }), where, prev, next),
      h("table", { id: "runs" }, h("thead", {}, h("tr", {}, ["Run", "Pipeline", "State", "Schedule", "Created", "Duration", "Source"].map(c => h("th", {}, c)))), table));
    let runs = [], page = 0, last = "";
    function render() {
      const q = search.value.trim().toLowerCase();
      const shown = runs.filter(r => (!state.value || r.state === state.value) &&
        (!sched.value || (sched.value === "-" ? !r.schedule : r.schedule === sched.value)) &&
        (!q || r.id.toLowerCase().includes(q) || (r.name || "").toLowerCase().includes(q)));
      const pages = Math.max(1, Math.ceil(shown.length / PAGE));
      page = Math.min(Math.max(page, 0), pages - 1);
      const slice = shown.slice(page * PAGE, (page + 1) * PAGE);
      where.textContent = shown.length ? `${page * PAGE + 1}–${page * PAGE + slice.length} of ${shown.length}` : "";
      prev.disabled = page === 0;
      next.disabled = page >= pages - 1;
      table.replaceChildren(...(slice.length ? slice.map(r => h("tr", { class: "click", "data-key": r.id, onclick: () => location.hash = `#/runs/${enc(r.id)}` },
        h("td", { class: "mono" }, h("a", { href: `#/runs/${enc(r.id)}` }, r.id)), h("td", {}, r.name), h("td", {}, badge(r.state)),
        h("td", {}, r.schedule ? h("a", { href: `#/schedules/${enc(r.schedule)}`, onclick: ev => ev.stopPropagation() }, r.schedule) : h("span", { class: "muted" }, "by hand")),
        h("td", {}, fmtTime(r.created_at)), h("td", { class: "num" }, runDur(r)), h("td", { class: "muted" }, r.source)))
        : [h("tr", {}, h("td", { colspan: 7, class: "muted" }, runs.length ? "No run matches." : "No runs yet: submit a spec above or with nerflow submit."))]));
    }
    every(3000, async () => {
      try {
        ({ runs } = await api("/api/v1/runs?limit=1000"));
        status.replaceChildren();
        const json = JSON.stringify(runs.map(r => [r.id, r.state, r.finished_at, r.schedule]));
        if (json === last && !runs.some(r => r.state === "running")) return; // nothing moved
        last = json;
        const names = [...new Set(runs.map(r => r.schedule).filter(Boolean))].sort();
        const chosen = sched.value;
        sched.replaceChildren(h("option", { value: "" }, "all runs"), h("option", { value: "-" }, "by hand"), names.map(n => h("option", { value: n }, `schedule ${n}`)));
        sched.value = chosen && [...sched.options].some(o => o.value === chosen) ? chosen : "";
        render();
      } catch (e) { status.replaceChildren(problem(e)); }
    });
  }

  function submitForm() {
    const spec = h("textarea", { rows: 12, placeholder: "name: demo\nnodes:\n  train:\n    stage: train.tagger\n    ..." });
    const sets = h("input", { size: 60, placeholder: "overrides, e.g. train.epochs=3; train.fan_out.seed=1,2" });
    const out = h("div");
    const form = h("form", { class: "panel", hidden: true, onsubmit: async ev => {
      ev.preventDefault();
      try {
        const set = sets.value.split(";").map(s => s.trim()).filter(Boolean);
        const r = await api("/api/v1/runs", { method: "POST", body: JSON.stringify({ spec: spec.value, set, file: "dashboard.yaml" }) });
        location.hash = `#/runs/${enc(r.id)}`;
      } catch (e) { out.replaceChildren(problem(e)); }
    } }, h("h3", {}, "Submit a pipeline spec"), spec, h("div", { class: "toolbar" }, sets, h("button", { type: "submit" }, "Submit")), out);
    return form;
  }

  // ---- one run ----------------------------------------------------------
  function runPage(id, node) {
    let selected = node || null, last = null;
    const reports = new Map(); // node id -> rendered report card (fetched once)
    const head = h("div"), dag = h("div", { class: "dag panel" }), detail = h("div", { class: "panel grow", id: "node" });
    const curves = h("div", { class: "cards" }), evals = h("div", { class: "cards" });
    show(head, dag, h("div", { class: "row" }, detail),
      h("h2", {}, "Training curves"), curves, h("h2", {}, "Evaluations"), evals);
    const legend = h("div", { class: "legend" }, ["pending", "queued", "running", "lost", "requeued", "done", "cached", "failed", "cancelled"].map(badge));

    async function refresh() {
      let run;
      try { run = await api(`/api/v1/runs/${enc(id)}`); } catch (e) { head.replaceChildren(problem(e)); return; }
      last = run;
      const states = Object.fromEntries(run.nodes.map(n => [n.id, shown(n)]));
      const lost = run.nodes.filter(n => states[n.id] === "lost").map(n => n.id);
      head.replaceChildren(h("div", { class: "toolbar" }, h("h1", { class: "mono" }, run.id), badge(run.state), h("span", { class: "muted" }, run.name),
        h("span", { class: "spacer" }),
        h("button", { class: "danger", disabled: run.state !== "running" || run.source === "store", onclick: () => act("cancel") }, "Cancel"),
        h("button", { class: "plain", disabled: run.state !== "failed" && run.state !== "cancelled", onclick: () => act("retry") }, "Retry")),
        h("p", { class: "muted" }, `created ${fmtTime(run.created_at)} · ${runDur(run)} · ${countLine(run.nodes)}`),
        run.error ? h("p", { class: "error" }, run.error) : "",
        // What could not be read live: a run seen through the store only
        // (another process's embedded run) or while Redis is away.
        ...(run.warnings || []).map(w => h("p", { class: "warning" }, w)),
        lost.length ? h("p", { class: "warning", id: "lost" }, `The worker running ${lost.join(", ")} stopped: ` +
          "waiting for another worker to re-run it from its last checkpoint.") : "");
      dag.replaceChildren(window.nerflowDAG.render(run.graph.nodes, states, selected, nid => { selected = nid; refresh(); }, stateText), legend);
      if (selected) nodeDetail(run, selected); else detail.replaceChildren(h("p", { class: "muted" }, "Click a node for its progress, outputs and logs."));
      // place puts a node's card in node order, replacing the node's
      // previous card (a live curve, when the report arrives).
      const place = (box, nid, card) => {
        box.querySelector("p.placeholder")?.remove();
        card.dataset.node = nid;
        const old = [...box.children].find(c => c.dataset.node === nid);
        if (old) { old.replaceWith(card); return; }
        const after = [...box.children].find(c => c.dataset.node > nid);
        box.insertBefore(card, after || null);
      };
      for (const n of run.nodes) {
        const { stage, ports = [] } = run.graph.nodes.find(g => g.id === n.id) || {};
        if (stage === "train.tagger" && n.state === "running" && !reports.has(n.id)) {
          // While it trains, the curve comes from the epochs it logs.
          api(`/api/v1/runs/${enc(run.id)}/nodes/${enc(n.id)}/logs?limit=5000`).then(({ lines }) => {
            if (!reports.has(n.id)) place(curves, n.id, liveCurveCard(n.id, lines, ports.includes("dev")));
          }).catch(() => {});
          continue;
        }
        if (reports.has(n.id) || !n.outputs || !n.outputs.report) continue;
        if (stage !== "train.tagger" && stage !== "train.evaluate") continue;
        reports.set(n.id, true);
        const box = stage === "train.tagger" ? curves : evals;
        api(fileURL(run.id, n.id, "report", "report.json")).then(rep => {
          place(box, n.id, stage === "train.tagger" ? curveCard(n.id, rep) : evalCard(n.id, rep));
        }).catch(e => box.appendChild(h("div", { class: "panel" }, h("h3", {}, n.id), problem(e))));
      }
      if (!curves.children.length) curves.replaceChildren(h("p", { class: "muted placeholder" }, "No training node has started yet."));
      if (!evals.children.length) evals.replaceChildren(h("p", { class: "muted placeholder" }, "No finished evaluation yet."));
      if (run.state !== "running" && timer) { clearInterval(timer); timer = null; }
    }

    async function act(what) {
      try { await api(`/api/v1/runs/${enc(id)}/${what}`, { method: "POST" }); } catch (e) { head.appendChild(problem(e)); }
      if (!timer) every(2000, refresh); else refresh();
    }

    async function nodeDetail(run, nid) {
      const n = run.nodes.find(x => x.id === nid);
      if (!n) return;
      const state = shown(n);
      const rows = [["state", [badge(state), state === "lost" ? h("span", { class: "muted" }, " waiting to be re-run") : ""]],
        ["stage", n.stage], ["queue", n.queue], ["worker", n.worker || ""],
        ["attempt", n.attempt ? n.attempt + 1 : 1], ["started", fmtTime(n.started_at)],
        ["duration", n.started_at ? fmtDur(((n.finished_at && n.state !== "running") ? new Date(n.finished_at) : new Date()) - new Date(n.started_at)) : ""],
        ["key", h("span", { class: "mono" }, (n.key || "").slice(0, 16))]];
      const kids = [h("h3", { class: "mono" }, n.id), h("dl", { class: "kv" }, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]))];
      if (n.progress) {
        const pct = n.progress.total ? Math.min(100, 100 * n.progress.done / n.progress.total) : 0;
        const bar = h("div", { class: `progress ${state}` }, h("div"));
        bar.firstChild.style.width = pct.toFixed(1) + "%";
        const where = n.progress.total ? `${n.progress.done}/${n.progress.total} (${pct.toFixed(0)}%)` : `${n.progress.done}`;
        kids.push(h("h3", {}, "Progress"), bar, h("div", { class: "muted" }, `${where} ${n.progress.note || ""}`,
          state === "lost" ? " · as of the lost worker's last report" : ""));
      }
      if (n.error) kids.push(h("h3", {}, "Error"), h("p", { class: "error" }, n.error));
      const outs = Object.entries(n.outputs || {});
      if (outs.length) {
        kids.push(h("h3", {}, "Outputs"), h("table", {}, h("tbody", {}, outs.flatMap(([name, a]) => (a.files || []).map(f =>
          h("tr", {}, h("td", {}, name), h("td", { class: "muted" }, a.kind || ""), h("td", {}, h("a", { href: fileURL(run.id, n.id, name, f.name, true) }, f.name)),
            h("td", { class: "num", title: `${f.size} bytes` }, fmtBytes(f.size))))))));
      }
      const logs = h("pre", { class: "logs" }, "…");
      kids.push(h("h3", {}, "Logs"), logs);
      detail.replaceChildren(...kids);
      try {
        const { lines } = await api(`/api/v1/runs/${enc(run.id)}/nodes/${enc(nid)}/logs?limit=200`);
        logs.textContent = lines.length ? lines.map(logLine).join("\n") : "(no log lines)";
      } catch (e) { logs.textContent = String(e.message || e); }
    }

    every(2000, refresh);
  }

  function logLine(l) {
    const { time, level, msg, ...rest } = l;
    const extra = Object.entries(rest).map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`).join(" ");
    return `${(time || "").slice(11, 19)} ${level || ""} ${msg || ""} ${extra}`;
  }

  function countLine(nodes) {
    const c = {};
    nodes.forEach(n => { const s = shown(n); c[s] = (c[s] || 0) + 1; });
    return `${nodes.length} nodes: ` + Object.entries(c).map(([s, k]) => `${k} ${stateText(s)}`).join(", ");
  }

  function curveCard(node, rep) {
    const epochs = (rep.result && rep.result.epochs) || [];
    // A dev set was scored when a best epoch was picked, even if every
    // epoch scored 0.
    const best = rep.result && rep.result.best_epoch;
    const hasDev = best > 0;
    return h("div", { class: "panel", "data-curve": node }, h("h3", { class: "mono" }, node),
      epochs.length ? window.nerflowChart.render(epochs, hasDev) : h("p", { class: "muted" }, "no epochs"),
      h("div", { class: "legend" }, h("span", { class: "badge", style: "background:#d9822b" }, "train loss"), hasDev ? h("span", { class: "badge running" }, "dev F1") : "",
        best ? h("span", { class: "muted" }, `best epoch ${best}, dev F1 ${pct(rep.result.best_dev_f1)}`) : ""));
  }

  // liveCurveCard draws a running training's curve from the "epoch done"
  // lines it logs (loss, dev F1); hasDev says it was given a dev set.
  function liveCurveCard(node, lines, hasDev) {
    const epochs = lines.filter(l => l.msg === "epoch done" && typeof l.epoch === "number")
      .map(l => ({ epoch: l.epoch, train_loss: l.loss, dev_f1: l.dev_f1 }));
    const total = (lines.find(l => l.msg === "training") || {}).epochs;
    const bestF1 = hasDev && epochs.length ? Math.max(...epochs.map(e => e.dev_f1 || 0)) : null;
    return h("div", { class: "panel live", "data-curve": node }, h("h3", { class: "mono" }, node, " ", badge("running")),
      epochs.length ? window.nerflowChart.render(epochs, hasDev) : h("p", { class: "muted" }, "waiting for the first epoch"),
      h("div", { class: "legend" }, h("span", { class: "badge", style: "background:#d9822b" }, "train loss"), hasDev ? h("span", { class: "badge running" }, "dev F1") : "",
        h("span", { class: "muted", "data-epochs": epochs.length }, `epoch ${epochs.length}${total ? ` of ${total}` : ""}${bestF1 !== null ? `, best dev F1 so far ${pct(bestF1)}` : ""}`)));
  }

  // An evaluation given the distant labels of its split (input baseline)
  // shows their F1 beside the model's, and the gain: what training added
  // to simply applying the gazetteers.
  function evalCard(node, rep) {
    const base = rep.baseline;
    const baseOf = name => base ? (name === "micro" ? base.micro : (base.types || {})[name]) || {} : null;
    const row = (name, s, bold) => {
      const b = baseOf(name);
      return h("tr", {}, h("td", {}, bold ? h("b", {}, name) : name), h("td", { class: "num" }, pct(s.precision)),
        h("td", { class: "num" }, pct(s.recall)), h("td", { class: "num" }, bold ? h("b", {}, pct(s.f1)) : pct(s.f1)),
        h("td", { class: "num" }, s.support ?? ""), h("td", { class: "num" }, s.predicted ?? ""),
        b ? h("td", { class: "num", "data-labels-f1": name }, pct(b.f1)) : "",
        b ? h("td", { class: "num", "data-gain": name }, gain((s.f1 || 0) - (b.f1 || 0))) : "");
    };
    const types = Object.keys(rep.types || {}).sort();
    const cols = ["type", "P %", "R %", "F1 %", "gold", "pred"].concat(base ? ["labels F1 %", "gain"] : []);
    return h("div", { class: "panel", "data-eval": node }, h("h3", { class: "mono" }, node),
      h("table", {}, h("thead", {}, h("tr", {}, cols.map((c, i) => h("th", { class: i ? "num" : "" }, c)))),
        h("tbody", {}, types.map(t => row(t, rep.types[t])), row("micro", rep.micro || {}, true))),
      h("p", { class: "muted" }, `${rep.sentences} sentences, ${rep.tokens} tokens, token accuracy ${pct(rep.token_accuracy)}%`));
  }

  // ---- workers, schedules, models: tables of whatever the API lists -------
  function cell(v) {
    if (v === null || v === undefined) return "–";
    if (typeof v === "string" && /^\d{4}-\d\d-\d\dT/.test(v)) return fmtTime(v);
    if (typeof v === "number" && !Number.isInteger(v)) return v.toFixed(4);
    if (Array.isArray(v) && v.every(x => typeof x !== "object")) return v.length ? v.join(", ") : "–";
    if (typeof v === "object") return h("span", { class: "mono" }, JSON.stringify(v));
    return String(v);
  }

  // listPage shows what the API lists at path under key, refreshed. columns,
  // when given, are [title, item => content] pairs; otherwise every field
  // is a column. actions(item, done) gives a row's buttons; form(done) a
  // form above the table.
  function listPage({ title, path, key, empty, columns, actions, form }) {
    const body = h("div");
    let last = "";
    show(h("h1", {}, title), form ? form(() => { last = ""; refresh(); }) : "", body);
    const refresh = async () => {
      try {
        const data = await api(path);
        const json = JSON.stringify(data);
        if (json === last) return; // unchanged: keep the DOM (and what the user is clicking)
        last = json;
        const items = data[key] || [];
        if (!items.length) { body.replaceChildren(h("p", { class: "muted" }, empty)); return; }
        const cols = columns || [...new Set(items.flatMap(Object.keys))].map(c => [c.replaceAll("_", " "), it => cell(it[c])]);
        const done = () => { last = ""; refresh(); };
        body.replaceChildren(h("div", { class: "scroll" }, h("table", { id: key }, h("thead", {}, h("tr", {}, cols.map(([t]) => h("th", {}, t)), actions ? h("th") : "")),
          h("tbody", {}, items.map(it => h("tr", { "data-key": it.ref || it.name }, cols.map(([, f]) => h("td", {}, f(it))), actions ? h("td", { class: "actions" }, actions(it, done)) : ""))))));
      } catch (e) {
        last = "";
        body.replaceChildren(problem(e));
      }
    };
    every(4000, refresh);
  }

  const post = (path, body) => api(path, { method: "POST", body: JSON.stringify(body || {}) });

  function scheduleForm(done) {
    const name = h("input", { id: "sched-name", placeholder: "nightly", size: 12 });
    const cron = h("input", { id: "sched-cron", value: "0 2 * * *", size: 12 });
    const file = h("input", { id: "sched-spec", placeholder: "/srv/specs/conll03-distant.yaml (on the servers)", size: 44 });
    const sets = h("input", { id: "sched-set", placeholder: "overrides: gce.epochs=3; ...", size: 30 });
    const missed = h("select", { id: "sched-missed" }, h("option", {}, "run-once"), h("option", {}, "skip"));
    const out = h("span", { class: "error" });
    return h("form", { class: "panel toolbar", onsubmit: async ev => {
      ev.preventDefault();
      try {
        await post("/api/v1/schedules", { name: name.value, cron: cron.value, spec_file: file.value, missed: missed.value,
          set: sets.value.split(";").map(s => s.trim()).filter(Boolean) });
        out.textContent = ""; name.value = ""; done();
      } catch (e) { out.textContent = String(e.message || e); }
    } }, name, cron, file, sets, missed, h("button", { type: "submit", id: "sched-add" }, "Add schedule"), out);
  }

  const runLink = id => id ? h("a", { class: "mono", href: `#/runs/${enc(id)}` }, id) : "–";

  function schedulesPage() {
    listPage({
      title: "Schedules", path: "/api/v1/schedules", key: "schedules", form: scheduleForm,
      empty: "No schedules yet: add one above or with nerflow schedule add NAME --cron '0 2 * * *' SPEC.",
      columns: [["name", s => h("a", { href: `#/schedules/${enc(s.name)}` }, s.name)], ["cron", s => h("span", { class: "mono" }, s.cron)],
        ["spec", s => [h("span", { class: "mono path" }, s.spec_file), ...(s.overrides || []).flatMap(o => [h("br"), h("span", { class: "muted mono" }, `--set ${o}`)])]],
        ["missed", s => s.missed], ["next", s => s.paused ? badge("paused") : cell(s.next)],
        ["last tick", s => s.last_outcome || "–"], ["last run", s => runLink(s.last_run)], ["last success", s => runLink(s.last_success)]],
      actions: (s, done) => [
        h("button", { class: "plain", onclick: () => post(`/api/v1/schedules/${enc(s.name)}/${s.paused ? "resume" : "pause"}`).then(done) }, s.paused ? "Resume" : "Pause"), " ",
        h("button", { class: "danger", onclick: () => confirm(`Delete schedule ${s.name}?`) && post(`/api/v1/schedules/${enc(s.name)}/delete`).then(done) }, "Delete")],
    });
  }

  // schedulePage shows one schedule and its latest ticks: when, what became
  // of each (submitted, up to date, skipped, missed, failed) and its run.
  function schedulePage(name) {
    const body = h("div");
    show(h("div", { class: "toolbar" }, h("h1", {}, `Schedule ${name}`), h("span", { class: "spacer" }), h("a", { href: "#/schedules" }, "all schedules")), body);
    let last = "";
    every(4000, async () => {
      try {
        const [{ schedules }, { ticks }] = await Promise.all([api("/api/v1/schedules"), api(`/api/v1/schedules/${enc(name)}/history`)]);
        const json = JSON.stringify([schedules, ticks]);
        if (json === last) return;
        last = json;
        const sc = schedules.find(x => x.name === name) || {};
        body.replaceChildren(h("dl", { class: "kv panel" }, [["cron", h("span", { class: "mono" }, sc.cron)], ["spec", h("span", { class: "mono path" }, sc.spec_file)],
          ["overrides", (sc.overrides || []).map(o => `--set ${o}`).join(" ") || "–"], ["missed ticks", sc.missed], ["next", sc.paused ? badge("paused") : cell(sc.next)],
          ["last success", runLink(sc.last_success)]].flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
          h("h2", {}, "Ticks"),
          ticks.length ? h("table", { id: "ticks" }, h("thead", {}, h("tr", {}, ["tick", "outcome", "run", "handled", "by", "detail"].map(c => h("th", {}, c)))),
            h("tbody", {}, ticks.map(e => h("tr", {}, h("td", {}, fmtTime(e.tick)), h("td", {}, badge(e.outcome), e.missed ? ` (${e.missed} missed)` : ""),
              h("td", {}, runLink(e.run)), h("td", {}, fmtTime(e.at)), h("td", { class: "mono" }, e.scheduler || "–"), h("td", { class: "wrap" }, e.detail || "")))))
            : h("p", { class: "muted" }, "No tick yet."));
      } catch (e) { last = ""; body.replaceChildren(problem(e)); }
    });
  }

  const modelLink = ref => h("a", { class: "mono", href: `#/models/${enc(ref)}` }, ref);
  const tagBadges = tags => (tags || []).length ? tags.map(t => h("span", { class: "badge tag" }, t)) : "–";

  function promoteControl(ref, done) {
    const tag = h("select", {}, h("option", {}, "production"), h("option", {}, "staging"));
    return [tag, " ", h("button", { class: "plain", onclick: () => post(`/api/v1/models/${enc(ref)}/promote`, { tag: tag.value }).then(done) }, "Promote")];
  }

  function modelsPage() {
    listPage({
      title: "Models", path: "/api/v1/models", key: "models",
      empty: "No registered models: every run's final model is registered when it succeeds.",
      columns: [["model", m => modelLink(m.ref)], ["tags", m => tagBadges(m.tags)], ["F1 %", m => pct(m.f1) || "–"],
        ["trained by", m => m.stage || "–"], ["run", m => runLink(m.run)], ["model digest", m => h("span", { class: "mono" }, m.digest)],
        ["registered", m => fmtTime(m.registered)]],
      actions: (m, done) => promoteControl(m.ref, done),
    });
  }

  // modelPage shows one model version: the model's versions and tags, the
  // version's metrics per type, its lineage (run, training node and
  // parameters, datasets) and its files.
  function modelPage(ref) {
    const body = h("div");
    show(body);
    let last = "";
    async function refresh() {
      let v, rows;
      try {
        [v, { models: rows }] = await Promise.all([api(`/api/v1/models/${enc(ref)}`), api("/api/v1/models")]);
      } catch (e) { last = ""; body.replaceChildren(h("h1", { class: "mono" }, ref), problem(e)); return; }
      // Redrawn only when something changed: a redraw would reset the
      // promote control someone is choosing a tag in.
      const json = JSON.stringify([v, rows]);
      if (json === last) return;
      last = json;
      const versions = rows.filter(r => r.ref.slice(0, r.ref.lastIndexOf("@")) === v.name);
      const me = versions.find(r => r.ref === `${v.name}@${v.version}`) || {};
      const producer = (v.model && v.model.producer) || {};
      const files = (v.model && v.model.files) || [];
      const total = files.reduce((s, f) => s + f.size, 0);
      const lineage = [["run", runLink(v.run)], ["trained by", v.node ? h("a", { class: "mono", href: `#/runs/${enc(producer.run || v.run)}/${enc(v.node)}` }, v.node) : "–"],
        ["stage", v.stage ? `${v.stage} v${v.stage_version || 1}` : "–"], ["spec", v.spec_file ? h("span", { class: "mono path" }, v.spec_file) : (v.spec || "–")],
        ["overrides", (v.overrides || []).length ? v.overrides.map(o => `--set ${o}`).join(" ") : "–"],
        ["parameters", v.params ? h("pre", { class: "mono params" }, JSON.stringify(v.params, null, 1)) : "–"],
        ["node key", h("span", { class: "mono" }, (v.key || "").slice(0, 16) || "–")], ["nerflow", v.nerflow || "–"],
        ["registered", fmtTime(v.registered)]];
      body.replaceChildren(
        h("div", { class: "toolbar" }, h("h1", { class: "mono" }, `${v.name}@${v.version}`), tagBadges(me.tags), h("span", { class: "spacer" }),
          promoteControl(`${v.name}@${v.version}`, refresh)),
        h("div", { class: "row" },
          h("div", { class: "panel grow" }, h("h3", {}, "Lineage"), h("dl", { class: "kv", id: "lineage" }, lineage.flatMap(([k, x]) => [h("dt", {}, k), h("dd", {}, x)]))),
          h("div", { class: "panel grow" }, h("h3", {}, "Versions"), h("table", { id: "versions" }, h("thead", {}, h("tr", {}, ["version", "tags", "F1 %", "run"].map(c => h("th", {}, c)))),
            h("tbody", {}, versions.map(r => h("tr", { "data-key": r.ref, class: r.ref === me.ref ? "current" : "" }, h("td", {}, modelLink(r.ref)), h("td", {}, tagBadges(r.tags)),
              h("td", { class: "num" }, pct(r.f1) || "–"), h("td", {}, runLink(r.run)))))))),
        h("h2", {}, "Datasets upstream"),
        (v.datasets || []).length ? h("div", { class: "scroll" }, h("table", { id: "datasets" }, h("thead", {}, h("tr", {}, ["source", "digest", "used as"].map(c => h("th", {}, c)))),
          h("tbody", {}, v.datasets.map(d => h("tr", {}, h("td", { class: "mono path" }, d.source), h("td", { class: "mono" }, (d.digest || "").slice(7, 19)),
            h("td", {}, (d.ports || []).join(", "))))))) : h("p", { class: "muted" }, "none recorded"),
        h("h2", {}, `Model files (${fmtBytes(total)})`),
        h("table", { id: "files" }, h("tbody", {}, files.map(f => h("tr", {}, h("td", { class: "mono" }, f.name),
          h("td", { class: "num", title: `${f.size} bytes` }, fmtBytes(f.size)))))),
        h("h2", {}, "Evaluations"),
        (v.metrics || []).length ? h("div", { class: "cards" }, v.metrics.map(m => evalCard(m.node || "evaluation", m))) : h("p", { class: "muted" }, "No evaluation was registered with this model."));
    }
    every(10000, refresh);
  }

  // ---- queues ---------------------------------------------------------------
  // queuesPage shows each queue's counts and the tasks it archived (node
  // executions that failed for good). Retrying one retries its run
  // (the engine re-runs the run's failed nodes); deleting one drops the
  // task's record only.
  function queuesPage() {
    const counts = h("div"), archived = h("div"), status = h("div");
    show(h("h1", {}, "Queues"), status, counts, h("h2", {}, "Archived tasks"),
      h("p", { class: "muted" }, "Node executions that failed for good. Retry run re-runs the run's failed and cancelled nodes; Delete drops the task's record (the run stays failed)."),
      archived);
    let last = "";
    const refresh = async () => {
      try {
        const { queues } = await api("/api/v1/queues");
        const lists = await Promise.all(queues.map(q => api(`/api/v1/queues/${enc(q.name)}/archived`).then(r => r.tasks.map(t => Object.assign(t, { queue: q.name })))));
        status.replaceChildren();
        const json = JSON.stringify([queues, lists]);
        if (json === last) return;
        last = json;
        const num = v => h("td", { class: "num" }, v);
        counts.replaceChildren(h("div", { class: "scroll" }, h("table", { id: "queues" },
          h("thead", {}, h("tr", {}, ["queue", "pending", "active", "scheduled", "retry", "archived", "completed", "processed today", "failed today", "oldest pending"]
            .map((c, i) => h("th", { class: i ? "num" : "" }, c)))),
          h("tbody", {}, queues.map(q => h("tr", { "data-key": q.name }, h("td", {}, q.name, q.paused ? [" ", badge("paused")] : ""), num(q.pending), num(q.active),
            num(q.scheduled), num(q.retry), num(q.archived), num(q.completed), num(q.processed_today), num(q.failed_today),
            num(q.pending ? fmtDur(1000 * q.latency_seconds) : "–")))))));
        const tasks = lists.flat();
        const done = () => { last = ""; refresh(); };
        const act = (p, body) => post(p, body).then(done).catch(e => status.replaceChildren(problem(e)));
        archived.replaceChildren(tasks.length ? h("table", { id: "archived" },
          h("thead", {}, h("tr", {}, ["queue", "run", "node", "error", "failed", "attempts", ""].map(c => h("th", {}, c)))),
          h("tbody", {}, tasks.map(t => h("tr", { "data-key": t.id }, h("td", {}, t.queue), h("td", {}, runLink(t.run)),
            h("td", {}, t.run ? h("a", { class: "mono", href: `#/runs/${enc(t.run)}/${enc(t.node)}` }, t.node) : h("span", { class: "mono" }, t.id)),
            h("td", { class: "error wrap" }, t.error), h("td", {}, fmtTime(t.failed_at)), h("td", { class: "num" }, t.attempts),
            h("td", { class: "actions" }, t.run ? h("button", { class: "plain", onclick: () => act(`/api/v1/runs/${enc(t.run)}/retry`) }, "Retry run") : "", " ",
              h("button", { class: "danger", onclick: () => confirm(`Delete the archived task ${t.id}?`) && act(`/api/v1/queues/${enc(t.queue)}/archived/delete`, { id: t.id }) }, "Delete"))))))
          : h("p", { class: "muted" }, "No archived tasks."));
      } catch (e) { last = ""; status.replaceChildren(problem(e)); }
    };
    every(4000, refresh);
  }

  // ---- predict ------------------------------------------------------------
  const palette = ["#ffd8a8", "#b2f2bb", "#a5d8ff", "#eebefa", "#ffec99", "#c3fae8", "#ffc9c9"];
  function predictPage() {
    const text = h("textarea", { rows: 5 }, "John Smith flew from Paris to Berlin on Monday to meet Anna Weber.");
    const out = h("div");
    show(h("h1", {}, "Predict"), h("p", { class: "muted" }, info.model ? `Model ${info.model}, through POST /v1/predict.` : "This server serves no model (start nerflow serve with --model)."),
      h("div", { class: "panel" }, text, h("div", { class: "toolbar" }, h("button", { id: "tag", onclick: run }, "Find entities"))), out);
    async function run() {
      try {
        const r = await post("/v1/predict", { text: text.value });
        out.replaceChildren(annotated(text.value, r.results[0].entities, r.model), entityTable(r.results[0].entities),
          h("p", { class: "muted", id: "served-by" }, `model ${r.model.name || ""} ${r.model.version || ""} · ${r.token_count} tokens · digest ${(r.model.digest || "").slice(7, 19)}`));
      } catch (e) { out.replaceChildren(problem(e)); }
    }
  }

  // annotated highlights entities given as UTF-8 byte offsets.
  function annotated(text, entities, model) {
    const bytes = new TextEncoder().encode(text), dec = new TextDecoder();
    const colors = Object.fromEntries((model.types || []).map((t, i) => [t, palette[i % palette.length]]));
    const kids = [];
    let at = 0;
    for (const e of [...entities].sort((a, b) => a.start - b.start)) {
      if (e.start < at) continue;
      kids.push(dec.decode(bytes.slice(at, e.start)));
      const span = h("span", { class: "entity", title: `${e.type} ${e.confidence.toFixed(3)}` }, dec.decode(bytes.slice(e.start, e.end)), h("small", {}, e.type));
      span.style.background = colors[e.type] || "#e9ecef";
      kids.push(span);
      at = e.end;
    }
    kids.push(dec.decode(bytes.slice(at)));
    return h("div", { class: "annotated", id: "annotated" }, kids);
  }

  function entityTable(entities) {
    return h("table", {}, h("thead", {}, h("tr", {}, ["entity", "type", "confidence", "bytes", "tokens"].map((c, i) => h("th", { class: i > 1 ? "num" : "" }, c)))),
      h("tbody", {}, entities.map(e => h("tr", {}, h("td", {}, e.text), h("td", {}, e.type), h("td", { class: "num" }, e.confidence.toFixed(3)),
        h("td", { class: "num" }, `${e.start}-${e.end}`), h("td", { class: "num" }, `${e.token_start}-${e.token_end}`)))));
  }

  // ---- routing --------------------------------------------------------------
  function route() {
    if (timer) { clearInterval(timer); timer = null; }
    const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
    const page = parts[0] || "runs";
    document.querySelectorAll("#nav a").forEach(a => a.classList.toggle("active", a.dataset.page === page));
    if (page === "runs" && parts[1]) return runPage(parts[1], parts[2]);
    if (page === "workers") return listPage({ title: "Workers", path: "/api/v1/workers", key: "workers", empty: "No live workers: start one with nerflow worker.",
      columns: [["name", w => h("span", { class: "mono" }, w.name)], ["host", w => w.host], ["device", w => w.device], ["queues", w => w.queues.join(", ")],
        ["busy", w => `${w.busy} (${Math.round(100 * w.utilization)}%)`], ["version", w => w.version], ["up since", w => fmtTime(w.started)],
        ["running", w => w.running.length ? w.running.map(r => { const [run, ...node] = r.split("/"); return h("div", {}, h("a", { class: "mono", href: `#/runs/${enc(run)}/${enc(node.join("/"))}` }, r)); }) : "–"]] });
    if (page === "schedules" && parts[1]) return schedulePage(parts[1]);
    if (page === "schedules") return schedulesPage();
    if (page === "models" && parts[1]) return modelPage(parts[1]);
    if (page === "models") return modelsPage();
    if (page === "predict") return predictPage();
    if (page === "queues") return queuesPage();
    return runsPage();
  }

  document.getElementById("logout").addEventListener("click", async () => {
    await fetch("/logout", { method: "POST", credentials: "same-origin" });
    location.href = "/login";
  });
  window.addEventListener("hashchange", route);
  api("/api/v1/info").then(i => { info = i; }).catch(() => {}).finally(route);
})();
