// verl-swe view: the viewer's code (see viewer.html). Model output is only ever set as textContent.
"use strict";
const INDEX = window.VERL_SWE_INDEX || {rows: [], errors: [{path: "data/index.js", reason: "missing: rebuild with verl-swe view"}]};
const byId = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  // Builds DOM from text: every string child becomes a text node, so model output cannot become markup.
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else if (k === "text") node.textContent = v; else node.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
  return node;
}

function state() { return new URLSearchParams(location.hash.slice(1)); }
function setState(changes) {
  const s = state();
  for (const [k, v] of Object.entries(changes)) { if (v === "" || v === null) s.delete(k); else s.set(k, v); }
  location.hash = s.toString();
}

function pct(x) { return (100 * x).toFixed(1); }

function renderSummary() {
  const box = byId("summary"), rows = INDEX.rows, r = INDEX.report;
  box.append(el("span", {text: INDEX.run_dir || ""}), el("span", {text: `${rows.length} trajectories`}),
             el("span", {text: `${rows.filter((x) => x.resolved).length} resolved`}));
  if (r) {
    box.append(el("span", {id: "pass1", text: `Pass@1 ${pct(r["pass@1"])} ± ${pct(r["pass@1_sem"])} (${r.runs} runs, ${r.tasks} tasks)`}),
               el("span", {text: `Pass@${r.runs} ${pct(r["pass@k"][String(r.runs)])}`}));
  }
  const errors = byId("errors");
  if (INDEX.errors.length) {
    errors.append(el("strong", {text: `${INDEX.errors.length} file(s) could not be read; the rest are shown:`}));
    const ul = el("ul", {id: "error-list"});
    for (const e of INDEX.errors) ul.append(el("li", {}, el("code", {text: e.path}), ": ", e.reason));
    errors.append(ul);
  }
}

function renderSteps() {
  // A training run: its learning curve as a table (reward, resolved, format errors, turns per policy step).
  const steps = INDEX.steps || [];
  if (!steps.length) return;
  byId("step-rows").replaceChildren(...steps.map((x) => {
    const tr = el("tr", {class: "step-row", "data-step": x.step},
      el("td", {}, el("a", {href: "#step=" + x.step, text: x.step})), el("td", {text: x.episodes}),
      el("td", {text: x.reward.toFixed(3)}), el("td", {text: pct(x.resolved)}),
      el("td", {text: pct(x.format_errors)}), el("td", {text: x.turns.toFixed(1)}));
    tr.addEventListener("click", (ev) => { if (ev.target.tagName !== "A") setState({step: x.step}); });
    return tr;
  }));
}

function fillSelect(id, values, compare) {
  const sel = byId(id);
  for (const v of [...new Set(values)].sort(compare)) sel.append(el("option", {value: v, text: v}));
  sel.addEventListener("change", () => setState({[sel.dataset.key]: sel.value}));
}

function renderList() {
  const s = state(), f = {resolved: s.get("resolved") || "", exit: s.get("exit") || "", repo: s.get("repo") || "",
                          hack: s.get("hack") || "", step: s.get("step") || "", q: (s.get("q") || "").toLowerCase()};
  byId("f-resolved").value = f.resolved; byId("f-exit").value = f.exit; byId("f-repo").value = f.repo;
  byId("f-hack").value = f.hack; byId("f-step").value = f.step;
  if (byId("f-q").value.toLowerCase() !== f.q) byId("f-q").value = s.get("q") || "";
  const shown = INDEX.rows.filter((r) =>
    (f.resolved === "" || String(Number(r.resolved)) === f.resolved) && (f.exit === "" || r.exit_status === f.exit) &&
    (f.repo === "" || r.repo === f.repo) && (f.q === "" || r.instance_id.toLowerCase().includes(f.q)) &&
    (f.hack === "" || String(Number((r.hack || []).length > 0)) === f.hack) &&
    (f.step === "" || String(r.step) === f.step));
  const body = byId("rows");
  body.replaceChildren(...shown.map((r) => {
    const tr = el("tr", {"data-id": r.id, class: "row"},
      el("td", {}, el("a", {href: "#" + new URLSearchParams({...Object.fromEntries(s), traj: r.id}), text: r.instance_id})),
      el("td", {text: r.run === null ? r.episode_id : r.run}), el("td", {text: r.repo}),
      el("td", {class: r.resolved ? "yes" : "no", text: r.resolved ? "yes" : "no"}),
      el("td", {class: "status", text: r.exit_status}), el("td", {text: r.turns}), el("td", {text: r.reward}),
      el("td", {text: r.generated_tokens}), el("td", {text: r.patch_lines}),
      el("td", {class: "hack", text: (r.hack || []).join(" ") + (r.hack_zeroed ? " (reward 0)" : "")}));
    tr.addEventListener("click", (ev) => { if (ev.target.tagName !== "A") setState({traj: r.id}); });
    return tr;
  }));
  byId("count").textContent = `${shown.length} of ${INDEX.rows.length} shown`;
}

function nodes(...xs) { return xs.filter((x) => x !== null && x !== undefined); }  // DOM append() would print "null"

function block(label, text, cls) {
  if (text === null || text === undefined || text === "") return null;
  return el("div", {class: cls || ""}, el("div", {class: "label", text: label}), el("pre", {text: String(text)}));
}

function diff(patch) {
  const pre = el("pre", {id: "patch"});
  for (const line of patch.replace(/\n$/, "").split("\n")) {
    const cls = line.startsWith("+") && !line.startsWith("+++") ? "add" : line.startsWith("-") && !line.startsWith("---") ? "del"
              : line.startsWith("@@") ? "hunk" : "";
    pre.append(el("span", {class: cls, text: line + "\n"}));
  }
  return pre;
}

function testReport(grade) {
  if (!grade) return el("p", {id: "test-report", text: "Not graded (the episode did not submit)."});
  const box = el("div", {id: "test-report"},
    el("p", {}, "resolved: ", el("span", {class: grade.resolved ? "yes" : "no", text: grade.resolved ? "yes" : "no"}),
       `, patch applied: ${grade.patch_applied}, test exit code: ${grade.test_exit_code}`));
  for (const [kind, res] of Object.entries(grade.tests_status || {})) {
    const ul = el("ul");
    for (const t of res.failure || []) ul.append(el("li", {class: "no"}, "FAIL ", t));
    for (const t of res.success || []) ul.append(el("li", {class: "yes"}, "pass ", t));
    const claimed = grade.tampered ? " as the tampered log claims" : "";  // the verdict overrides these
    box.append(el("div", {class: "label", text: `${kind}: ${(res.success || []).length} passed, ${(res.failure || []).length} failed${claimed}`}), ul);
  }
  const integrity = grade.integrity;
  if (integrity) {
    box.append(el("p", {id: "integrity"}, "test run integrity: ",
      el("span", {class: grade.tampered ? "no" : "yes", text: grade.tampered ? "tampered" : "intact"}),
      ` (checks: ${(integrity.checks || []).join(", ") || "none"})`));
    const reasons = integrity.reasons || [];
    if (reasons.length) box.append(block("why the run counts as tampered", reasons.map((r) => `${r.check}: ${r.detail}`).join("\n")));
    if ((integrity.notes || []).length) box.append(block("integrity notes", integrity.notes.join("\n")));
  }
  if ((grade.static_flags || []).length) {
    box.append(block("static flags on the patch", grade.static_flags.map((x) => `${x.path}:${x.line ?? "-"} ${x.rule}: ${x.text}`).join("\n")));
  }
  const dropped = Object.entries(grade.dropped_files || {});
  if (dropped.length) box.append(block("files the patch guard dropped", dropped.map(([p, why]) => `${p}: ${why}`).join("\n")));
  box.append(...nodes(block("grading error", grade.error), block("test log", grade.log_path)));
  return box;
}

function hackFlags(t) {
  const flags = Object.entries(t.hack_flags || {}).filter(([, evidence]) => evidence && evidence.length);
  if (!flags.length) return null;
  const ul = el("ul");
  for (const [flag, evidence] of flags) {
    const items = el("ul");
    for (const e of evidence) items.append(el("li", {text: e}));
    ul.append(el("li", {class: "hack-flag"}, el("span", {class: "hack", text: flag}), items));
  }
  return el("div", {id: "hack-flags"}, el("div", {class: "label",
    text: "reward-hack flags" + (t.hack_zeroed ? " (on_hack: zero: outcome reward set to 0)" : "")}), ul);
}

function renderDetail(t) {
  const s = state(); s.delete("traj");
  const d = byId("detail");
  const turns = t.turns.map((u) => el("div", {class: "turn" + (u.format_error ? " format-error" : ""), "data-turn": u.index}, ...nodes(
    el("h3", {text: `Turn ${u.index + 1}` + (u.tool ? ` · ${u.tool}` : "") + (u.format_error ? " · format error" : "")}),
    el("div", {class: "meta", text: `${u.generated_tokens} generated tokens · ${u.observation_tokens} observation tokens · ` +
      `stop: ${u.stop_reason} · model ${u.generation_s}s · tool ${u.tool_s}s`}),
    u.command === null ? null : block("reasoning", u.reasoning, "reasoning"),
    u.command === null ? block("response (no valid action)", u.assistant, "command") : block("command", u.command, "command"),
    block("observation", u.observation, "observation"))));
  d.replaceChildren(...nodes(
    el("p", {}, el("a", {href: "#" + s.toString(), id: "back", text: "← back to the list"})),
    el("h2", {id: "title", text: `${t.instance_id} · ${t.episode_id}`}),
    el("p", {}, "resolved: ", el("span", {class: t.resolved ? "yes" : "no", text: t.resolved ? "yes" : "no"}),
       ` · exit status: `, el("span", {class: "status", id: "exit-status", text: t.exit_status}),
       ` · ${t.turns.length} turns · reward ${t.reward} (turn penalty ${t.turn_penalty})` +
       ` · ${t.prompt_tokens} prompt + ${t.response_tokens} response tokens (${t.generated_tokens} generated)`),
    block("error", t.error),
    hackFlags(t),
    el("details", {}, el("summary", {text: "task"}), el("pre", {text: t.task})),
    el("details", {}, el("summary", {text: "system prompt"}), el("pre", {text: t.system})),
    el("div", {id: "turns"}, ...turns),
    el("h3", {text: "Final patch"}), t.patch ? diff(t.patch) : el("p", {id: "patch", text: "(empty)"}),
    el("h3", {text: "Test report"}), testReport(t.grade),
    el("details", {}, el("summary", {text: "metadata"}), el("pre", {text: JSON.stringify({metadata: t.metadata, timings: t.timings}, null, 1)}))));
  byId("list").hidden = true; d.hidden = false;
}

window.VERL_SWE_TRAJ = (t) => { if (String(state().get("traj")) === String(t.id)) renderDetail(t); };

function route() {
  const id = state().get("traj");
  byId("steps").hidden = id !== null || !(INDEX.steps || []).length;
  if (id === null) { byId("detail").hidden = true; byId("list").hidden = false; renderList(); return; }
  if (!/^\d+$/.test(id)) return;
  const d = byId("detail"); d.replaceChildren(el("p", {text: "loading…"})); d.hidden = false; byId("list").hidden = true;
  const script = el("script", {src: `data/t/${id}.js`});
  script.onerror = () => d.replaceChildren(el("p", {class: "no", text: `data/t/${id}.js could not be loaded`}));
  document.body.append(script);
}

byId("f-resolved").dataset.key = "resolved"; byId("f-exit").dataset.key = "exit"; byId("f-repo").dataset.key = "repo";
byId("f-resolved").addEventListener("change", (e) => setState({resolved: e.target.value}));
byId("f-hack").addEventListener("change", (e) => setState({hack: e.target.value}));
fillSelect("f-exit", INDEX.rows.map((r) => r.exit_status));
fillSelect("f-repo", INDEX.rows.map((r) => r.repo));
byId("f-step").dataset.key = "step";
fillSelect("f-step", INDEX.rows.filter((r) => r.step !== null && r.step !== undefined).map((r) => String(r.step)),
           (a, b) => Number(a) - Number(b));
byId("f-q").addEventListener("input", (e) => setState({q: e.target.value}));
renderSummary();
renderSteps();
window.addEventListener("hashchange", route);
route();
