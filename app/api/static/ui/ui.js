// runway's read-only page: the REST API's answers (../v1/...), redrawn every 5 s.
// Plain browser JavaScript, no build step, nothing loaded from elsewhere. Paths are relative,
// so the page works at /ui/ and behind the API server's service proxy (.../proxy/ui/).
"use strict";

const API = "../v1";
const PAGE = 500;
const TOKEN_KEY = "runway.token";

function headers() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  // X-Runway-Authorization: the API server's service proxy removes Authorization.
  return token ? { "X-Runway-Authorization": "Bearer " + token } : {};
}

class Unauthorized extends Error {}

// X-Runway-Served-By of the answers a replica gave itself although it is not the leader (it
// could not ask the leader): what only the leader holds may be missing. Gathered per refresh.
let followerAnswers = new Set();

async function getJSON(path, params) {
  const url = new URL(API + path, document.baseURI);
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null) url.searchParams.set(k, v);
  }
  const resp = await fetch(url, { headers: headers(), cache: "no-store" });
  const served = resp.headers.get("X-Runway-Served-By");
  if (served && served.startsWith("follower")) followerAnswers.add(served);
  if (resp.status === 401) throw new Unauthorized(await resp.text());
  if (!resp.ok) {
    let message = resp.statusText;
    try {
      const body = await resp.json();
      message = body.error || body.message || message;
    } catch (e) { /* not JSON */ }
    throw new Error(`${path}: ${resp.status} ${message}`);
  }
  return resp.json();
}

// Every page of a paged list (limit + continue), concatenated.
async function getAll(path, field, params) {
  let items = [];
  let token = null;
  for (let i = 0; i < 10000; i++) {
    const body = await getJSON(path, { ...params, limit: PAGE, continue: token });
    items = items.concat(body[field] || []);
    token = body["continue"];
    if (!token) return items;
  }
  throw new Error(`${path}: too many pages`);
}

// --- formatting ------------------------------------------------------------------------------

function duration(seconds) {
  const s = Math.floor(Math.abs(seconds));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60), h = Math.floor(s / 3600), d = Math.floor(s / 86400);
  if (s < 600) return s % 60 ? `${m}m${s % 60}s` : `${m}m`;
  if (h < 3) return `${m}m`;
  if (d < 2) return m % 60 ? `${h}h${m % 60}m` : `${h}h`;
  return h % 24 ? `${d}d${h % 24}h` : `${d}d`;
}

function relative(rfc3339) {
  if (!rfc3339) return "-";
  const delta = (Date.parse(rfc3339) - Date.now()) / 1000;
  return delta >= 0 ? `in ${duration(delta)}` : `${duration(delta)} ago`;
}

function ageOf(unixSeconds) {
  return unixSeconds == null ? "-" : duration(Date.now() / 1000 - unixSeconds);
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(child ?? "-"));
  }
  return node;
}

function fill(tbody, rows, empty, columns) {
  tbody.replaceChildren();
  if (!rows.length) {
    tbody.append(el("tr", { class: "empty" }, el("td", { colspan: String(columns) }, empty)));
    return;
  }
  for (const row of rows) tbody.append(row);
}

// --- sections --------------------------------------------------------------------------------

function pendingTable(queue, workloads) {
  const table = el("table", { id: `pending-${queue}`, "data-queue": queue });
  table.append(el("thead", {}, el("tr", {},
    ...["#", "workload", "priority", "state", "held by", "until", "why it waits"].map(
      (h) => el("th", {}, h)))));
  const tbody = el("tbody");
  const rows = workloads.map((w) => el("tr", { "data-workload": `${w.namespace}/${w.name}` },
    el("td", { class: "num" }, String(w.position)),
    el("td", { class: "name" }, `${w.namespace}/${w.name}`),
    el("td", { class: "num" }, String(w.priority)),
    el("td", { class: `state-${w.state}` }, w.state),
    el("td", { class: "rule nowrap" }, w.rule || "-"),
    el("td", { title: w.until || w.requeueAt || "" }, relative(w.until || w.requeueAt)),
    el("td", {}, w.reason || "-")));
  fill(tbody, rows, "nothing pending", 7);
  table.append(tbody);
  return table;
}

function queueTree(queues, workloads) {
  const byName = new Map(queues.map((q) => [q.name, q]));
  const pending = new Map();
  for (const w of workloads) {
    if (w.position == null) continue;
    if (!pending.has(w.queue)) pending.set(w.queue, []);
    pending.get(w.queue).push(w);
  }
  for (const list of pending.values()) list.sort((a, b) => a.position - b.position);

  function render(q) {
    const c = q.counts || {};
    const box = el("div", { class: "queue", id: `queue-${q.name}`, "data-queue": q.name });
    box.append(el("div", { class: "queue-head" },
      el("span", { class: "queue-name" }, q.name),
      el("span", { class: "muted" }, q.queueingStrategy),
      el("span", { class: "counts", "data-pending": String(c.pending || 0),
                   "data-admitted": String(c.admitted || 0) },
        `pending ${c.pending || 0} · admitted ${c.admitted || 0} · backoff ${c.backoff || 0}` +
        ` · deactivated ${c.deactivated || 0}`),
      el("span", { class: "muted" },
        `min-runtime preempt ${duration(q.effectivePreemptMinRuntimeSeconds)},` +
        ` reclaim ${duration(q.effectiveReclaimMinRuntimeSeconds)}`)));
    if (!q.children.length) box.append(pendingTable(q.name, pending.get(q.name) || []));
    for (const child of q.children) if (byName.has(child)) box.append(render(byName.get(child)));
    return box;
  }
  const root = document.getElementById("queues");
  root.replaceChildren(...queues.filter((q) => q.parent == null).map(render));
  // Queues that pods name but the config does not declare.
  for (const [name, list] of pending) {
    if (!byName.has(name)) {
      root.append(el("div", { class: "queue", id: `queue-${name}`, "data-queue": name },
        el("div", { class: "queue-head" }, el("span", { class: "queue-name" }, name),
          el("span", { class: "muted" }, "not in the config")),
        pendingTable(name, list)));
    }
  }
}

function protectedRows(workloads) {
  const now = Date.now();
  return workloads
    .filter((w) => w.state === "admitted" && w.protectedUntil && Date.parse(w.protectedUntil) > now)
    .sort((a, b) => Date.parse(a.protectedUntil) - Date.parse(b.protectedUntil))
    .map((w) => el("tr", { "data-workload": `${w.namespace}/${w.name}` },
      el("td", {}, `${w.namespace}/${w.name}`),
      el("td", {}, w.queue),
      el("td", { class: "num" }, String(w.priority)),
      el("td", {}, w.protectedUntil),
      el("td", {}, relative(w.protectedUntil))));
}

function heldRows(workloads) {
  return workloads
    .filter((w) => w.state === "backoff" || w.state === "deactivated")
    .map((w) => el("tr", { "data-workload": `${w.namespace}/${w.name}` },
      el("td", { class: "name" }, `${w.namespace}/${w.name}`),
      el("td", {}, w.queue),
      el("td", { class: `state-${w.state}` }, w.state),
      el("td", { class: "nowrap" }, w.requeueAt || "-"),
      el("td", {}, w.state === "deactivated" ? "until activated" : relative(w.requeueAt)),
      el("td", {}, w.reason || "-")));
}

function preemptionRows(tasks, finished) {
  return tasks.map((t) => el("tr", { "data-preemptor": t.preemptor },
    el("td", {}, t.preemptor),
    el("td", {}, t.node),
    el("td", {}, t.victims.join(", ") || "-"),
    ...(finished
      ? [el("td", { class: `result-${t.result}` }, t.result + (t.error ? `: ${t.error}` : "")),
         el("td", {}, t.seconds == null ? "-" : `${t.seconds.toFixed(2)} s`)]
      : [el("td", {}, t.rule || "-")]),
    el("td", {}, ageOf(t.started))));
}

function decisionRows(decisions) {
  return decisions.map((d) => {
    const chosen = d.nodes.find((n) => n.node === d.chosenNode);
    const victims = el("ul");
    for (const p of (chosen ? chosen.pods : [])) {
      victims.append(el("li", {}, `${p.pod}: ${p.outcome}` + (p.reason ? ` — ${p.reason}` : "")));
    }
    return el("tr", { "data-preemptor": d.preemptor.pod, "data-time": d.time },
      el("td", { title: d.time }, relative(d.time)),
      el("td", {}, d.preemptor.pod),
      el("td", {}, d.chosenNode || "none"),
      el("td", { class: "num" }, String(d.victims.length)),
      el("td", {}, el("div", {}, d.reason || "-"), victims));
  });
}

// --- the loop --------------------------------------------------------------------------------

async function refresh() {
  const error = document.getElementById("error");
  followerAnswers = new Set();
  try {
    const [summary, queues, workloads, preemptions, decisions] = await Promise.all([
      getJSON("/cache/summary"),
      getJSON("/queues"),
      getAll("/workloads", "items"),
      getJSON("/preemptions"),
      getJSON("/preemptions/decisions", { limit: 20 }),
    ]);
    document.getElementById("summary").textContent =
      `${summary.pods} pods (${summary.pending} pending) on ${summary.nodes} nodes, ` +
      `${summary.workloads} workloads` + (summary.leader === false ? " · not the leader" : "");
    queueTree(queues.queues, workloads);
    fill(document.querySelector("#protected tbody"), protectedRows(workloads),
      "no workload is protected now", 5);
    fill(document.querySelector("#inflight tbody"), preemptionRows(preemptions.inFlight, false),
      "none in flight", 5);
    fill(document.querySelector("#recent tbody"), preemptionRows(preemptions.recent, true),
      "none recently", 6);
    fill(document.querySelector("#held tbody"), heldRows(workloads),
      "no workload in backoff or deactivated", 6);
    fill(document.querySelector("#decisions tbody"), decisionRows(decisions.decisions),
      "no preempt decision yet", 5);
    const served = document.getElementById("served");
    served.textContent = followerAnswers.size
      ? `Answered by a runway replica that is not the leader and could not ask it ` +
        `(${[...followerAnswers].join(", ")}): preemptions, decisions and gate holds, which ` +
        `only the leader holds, may be missing.`
      : "";
    served.hidden = !followerAnswers.size;
    error.hidden = true;
    document.getElementById("login").hidden = true;
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
    document.body.dataset.loaded = String(Date.now());
  } catch (e) {
    if (e instanceof Unauthorized) {
      document.getElementById("login").hidden = false;
    }
    error.textContent = e.message;
    error.hidden = false;
  }
}

document.getElementById("refresh").addEventListener("click", refresh);
document.getElementById("login").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value.trim());
  refresh();
});
setInterval(() => { if (document.getElementById("auto").checked) refresh(); }, 5000);
refresh();
