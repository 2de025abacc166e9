// The gpusched dashboard: four views over the REST API (/api/v1), redrawn when the server's
// event stream (/api/v1/events) says something changed. No framework and no dependencies:
// the DOM is built with createElement and textContent (never innerHTML, so a task name cannot
// inject markup), and the accounting chart is plain SVG.
//
// Authentication: when the server answers 401, the page asks for an API token once, keeps it
// in sessionStorage (this tab only; gone when it closes) and sends it as
// "Authorization: Bearer TOKEN" on every request. The event streams are read with fetch
// (EventSource cannot send headers), so the token never goes into a URL, where logs and
// history would keep it.
"use strict";

const API = "/api/v1";
const STATES = ["pending", "assigned", "running", "succeeded", "failed", "cancelled"];
const SVG_NS = "http://www.w3.org/2000/svg";

// ---------------------------------------------------------------- helpers

// h("a", {href: "#/x", class: "y"}, "text", child...): an element.
function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

// ---------------------------------------------------------------- the API and its token

const TOKEN_KEY = "gpusched-token";

function authHeaders(extra) {
  const headers = Object.assign({}, extra || {});
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers["Authorization"] = "Bearer " + token;
  return headers;
}

// An Error for a refused or failed request; `status` is the HTTP status.
function apiError(status, message) {
  const e = new Error(message);
  e.status = status;
  return e;
}

async function api(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = authHeaders(opts.headers);
  const res = await fetch(API + path, opts);
  const body = await res.json();
  if (!res.ok) throw apiError(res.status, body.error ? body.error.message : res.statusText);
  return body;
}

// A server-sent event stream read with fetch, so that it carries the Authorization header.
// `on`: {EVENT: fn({data}), open(), error(), unauthorized()}. Reconnects after 2 s (with
// Last-Event-ID, like EventSource) until close(); a 401 stops it and calls unauthorized().
function openStream(path, on) {
  const abort = new AbortController();
  let lastId = null, closed = false;
  const stream = {close() { closed = true; abort.abort(); }};
  function dispatch(frame) {
    let name = "message";
    const data = [];
    for (const line of frame.split("\n")) {
      if (line === "" || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") name = value;
      else if (field === "data") data.push(value);
      else if (field === "id") lastId = value;
    }
    if (data.length && on[name]) on[name]({data: data.join("\n")});
  }
  (async () => {
    while (!closed) {
      try {
        const headers = authHeaders({"Accept": "text/event-stream"});
        if (lastId !== null) headers["Last-Event-ID"] = lastId;
        const res = await fetch(API + path, {headers: headers, signal: abort.signal,
                                             cache: "no-store"});
        if (res.status === 401) {
          closed = true;
          if (on.unauthorized) on.unauthorized();
          return;
        }
        if (!res.ok || !res.body) throw apiError(res.status, "HTTP " + res.status);
        if (on.open) on.open();
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const {value, done} = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, {stream: true}).replace(/\r\n?/g, "\n");
          let cut;
          while (!closed && (cut = buffer.indexOf("\n\n")) >= 0) {
            dispatch(buffer.slice(0, cut));
            buffer = buffer.slice(cut + 2);
          }
        }
      } catch (e) {
        if (closed) return;  // closed on purpose: the fetch was aborted
      }
      if (closed) return;
      if (on.error) on.error();
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  })();
  return stream;
}

// What the page shows instead of a view when the server wants a token (or refused the one
// it was given).
function signIn(message) {
  const input = h("input", {type: "password", id: "token-input", name: "token",
    autocomplete: "off", spellcheck: "false", required: true, placeholder: "gst_..."});
  const form = h("form", {id: "sign-in", class: "card", onsubmit: (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    connect();
    refresh();
  }},
    h("h1", {}, "Sign in"),
    h("p", {class: sessionStorage.getItem(TOKEN_KEY) ? "error" : "muted"}, message),
    h("p", {class: "muted"}, "Paste an API token (an admin creates one with ",
      h("code", {}, "gpusched token create --user NAME"), "). It is kept for this tab only."),
    h("label", {for: "token-input"}, "API token"), " ", input, " ",
    h("button", {type: "submit"}, "Sign in"));
  return form;
}

function size(mib) {
  if (mib >= 1024) return (mib / 1024).toFixed(mib % 1024 ? 1 : 0) + " GiB";
  return mib + " MiB";
}

function ago(ms) {
  if (!ms) return "-";
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 60) return s.toFixed(0) + "s ago";
  if (s < 3600) return (s / 60).toFixed(0) + "m ago";
  return (s / 3600).toFixed(1) + "h ago";
}

function clock(ms) {
  return ms ? new Date(ms).toLocaleTimeString() : "-";
}

function taskLink(t) {
  return h("a", {href: "#/task/" + t.id, class: "task-link", "data-task": t.id}, "#" + t.id);
}

function stateBadge(state) {
  return h("span", {class: "state state-" + state, "data-state": state}, state);
}

// A stable colour per task id (golden-angle hues), so a task keeps its colour on every GPU.
function taskColour(id) {
  return "hsl(" + ((id * 137.508) % 360).toFixed(1) + ", 55%, 55%)";
}

function table(headers, rows, attrs) {
  return h("table", attrs || {},
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", {scope: "col"}, x)))),
    h("tbody", {}, rows));
}

// ---------------------------------------------------------------- views

const views = {};

views.cluster = async function () {
  const {nodes} = await api("/nodes");
  const cards = nodes.map((n) => {
    const gpus = n.gpus.map((g) => {
      const bar = h("div", {class: "gpu-bar", role: "group", "data-total-mib": g.total_mib,
        "aria-label": "GPU " + g.index + ": " + size(g.allocated_mib) + " of " +
          size(g.total_mib) + " reserved by " + g.shares.length + " task(s)"});
      for (const s of g.shares) {
        const seg = h("a", {class: "seg" + (s.exclusive ? " exclusive" : ""),
          href: "#/task/" + s.task, "data-task": s.task, "data-mib": s.mib,
          title: "task #" + s.task + (s.name ? " " + s.name : "") + ": " + size(s.mib)},
          "#" + s.task);
        seg.style.width = (100 * s.mib / g.total_mib) + "%";
        seg.style.background = taskColour(s.task);
        bar.append(seg);
      }
      return h("div", {class: "gpu", "data-gpu": g.index},
        h("div", {class: "gpu-label"}, "GPU " + g.index + " · " + g.model),
        bar,
        h("div", {class: "gpu-text"}, size(g.allocated_mib) + " / " + size(g.total_mib) +
          " reserved" + (g.reported_free_mib >= 0 ? ", " + size(g.reported_free_mib) +
          " free on device" : "")));
    });
    return h("section", {class: "node card", "data-node": n.name, "aria-label": "node " + n.name},
      h("h2", {}, n.name, " ", h("span", {class: "node-state node-" + n.state}, n.state)),
      h("p", {class: "muted"}, n.address + " · " + n.running_tasks + " task(s) · heartbeat " +
        ago(n.last_heartbeat_ms)),
      h("div", {class: "gpus"}, gpus));
  });
  return [h("h1", {}, "Cluster"),
          nodes.length ? h("div", {class: "nodes"}, cards)
                       : h("p", {}, "No node has registered yet.")];
};

function queueTable(name, q) {
  const rows = q.tasks.map((t) => h("tr", {"data-task": t.id},
    h("td", {}, t.position), h("td", {}, taskLink(t)), h("td", {}, t.name || "-"),
    h("td", {}, t.pt), h("td", {}, t.fail_cnt), h("td", {class: "why"}, t.why)));
  return h("section", {class: "card", id: "queue-" + name},
    h("h2", {}, name === "Q" ? "Queue" : "Retry queue",
      h("span", {class: "muted"}, " · " + q.size + (q.size === 1 ? " task" : " tasks"))),
    q.tasks.length ? table(["#", "task", "name", "priority", "failures", "why it waits"], rows,
                           {class: "queue"})
                   : h("p", {class: "muted"}, "empty"));
}

views.queues = async function () {
  const q = await api("/queues");
  return [h("h1", {}, "Queues"),
          h("p", {class: "muted"}, "The queue is served by priority (lower first), then in " +
            "submission order. A task that failed, or found no node, waits in the retry " +
            "queue and returns to the queue one priority step lower at the next retry."),
          queueTable("Q", q.Q), queueTable("FQ", q.FQ)];
};

views.tasks = async function (args) {
  const state = args[0] || "";
  const page = await api("/tasks?limit=200" + (state ? "&state=" + state : "") +
    (args[1] ? "&after=" + args[1] : ""));
  const filter = h("nav", {class: "filters", "aria-label": "Filter by state"},
    [""].concat(STATES).map((s) => h("a", {href: "#/tasks/" + s,
      "aria-current": s === state ? "page" : null}, s || "all")));
  const rows = page.tasks.map((t) => h("tr", {"data-task": t.id},
    h("td", {}, taskLink(t)), h("td", {}, t.name || "-"),
    h("td", {}, stateBadge(t.state), t.failure && t.failure !== t.state ? " (" + t.failure + ")"
                                                                          : ""),
    h("td", {}, t.node || "-"), h("td", {}, t.gpus.join(",") || "-"),
    h("td", {}, t.gpu_mem_mib ? size(t.gpu_mem_mib) : t.request.gpus > 0 ? "whole GPU" : "-"),
    h("td", {}, t.reason)));
  return [h("h1", {}, "Tasks"), filter,
          table(["task", "name", "state", "node", "GPUs", "GPU memory", "reason"], rows,
                {class: "tasks"}),
          page.next_after ? h("a", {href: "#/tasks/" + state + "/" + page.next_after},
                              "Next page") : null];
};

function timeline(history, finished) {
  const end = finished || Date.now();
  const start = history.length ? history[0].at_ms : end;
  const span = Math.max(1, end - start);
  const bar = h("div", {class: "timeline", role: "img", "aria-label": "state timeline"});
  history.forEach((x, i) => {
    const to = i + 1 < history.length ? history[i + 1].at_ms : end;
    const seg = h("span", {class: "tl state-" + x.state, title: x.state + ": " + x.reason});
    seg.style.width = Math.max(0.5, 100 * (to - x.at_ms) / span) + "%";
    bar.append(seg);
  });
  return bar;
}

views.task = async function (args) {
  const t = await api("/tasks/" + encodeURIComponent(args[0]));
  const why = t.why;
  const done = ["succeeded", "failed", "cancelled"].includes(t.state);
  const facts = [
    ["state", stateBadge(t.state)],
    ["name", t.name || "-"],
    ["command", (t.redacted || []).includes("command") ? "(hidden: its owner's and admins' to read)"
                                                        : t.command.join(" ")],
    ["placement", t.node ? t.node + " GPU " + t.placement.gpus.join(",") + " (" +
      t.placement.gpu_mem_mib.map(size).join(", ") + ")" : "not placed"],
    ["GPU memory", t.gpu_mem_mib ? size(t.gpu_mem_mib) + " per GPU (" + t.mem_source + ")"
                                 : t.mem_source],
    ["priority", String(t.pt) + " (lower runs first)"],
    ["attempts / failures", t.attempts + " / " + t.fail_cnt],
    ["exit", t.exit_code === null ? "-" : "code " + t.exit_code + (done ? ": " + t.reason : "")],
    ["ended by", t.failure || "-"],
    ["why", why ? why.summary : t.reason],
  ];
  const breakdown = why && why.breakdown.length ? table(["score", "value", "weight"],
    why.breakdown.map((p) => h("tr", {}, h("td", {}, p.name), h("td", {}, p.value.toFixed(3)),
                                h("td", {}, p.weight))), {class: "breakdown"}) : null;
  const rejected = why && Object.keys(why.rejected).length ? h("ul", {class: "rejected"},
    Object.entries(why.rejected).map(([f, n]) => h("li", {}, n + (n === 1 ? " node" : " nodes") + " rejected by " + f)))
    : null;
  const log = logElement(t.id);
  const cancel = done ? null : h("button", {type: "button", id: "cancel", onclick: async () => {
    await api("/tasks/" + t.id + "/cancel", {method: "POST",
      headers: {"Content-Type": "application/json"}, body: "{}"});
    refresh();
  }}, "Cancel task");
  return [h("h1", {}, "Task #" + t.id, " ", stateBadge(t.state)),
    h("section", {class: "card"}, h("dl", {class: "facts"},
      facts.map(([k, v]) => [h("dt", {}, k), h("dd", {"data-fact": k}, v)])), cancel),
    h("section", {class: "card"}, h("h2", {}, "Timeline"), timeline(t.history || [], t.finished_ms),
      h("ol", {class: "history"}, (t.history || []).map((x) => h("li", {},
        h("time", {}, clock(x.at_ms)), " ", stateBadge(x.state), " ", x.reason)))),
    why ? h("section", {class: "card"}, h("h2", {}, "Placement decision"),
      h("p", {}, why.total_nodes ? why.feasible_nodes + "/" + why.total_nodes + " nodes fit" +
        (why.chosen_node ? ", chose " + why.chosen_node + " (score " + why.score.toFixed(3) + ")"
                         : "") : "no decision yet"), rejected, breakdown) : null,
    h("section", {class: "card"}, h("h2", {}, "Output"), log)];
};

// The task's output, followed over server-sent events. The element and its stream outlive a
// redraw of the same task (the text is kept); another task's view closes them. A dropped
// connection resumes where it stopped: the server numbers events by log offset.
let logStream = null;
function logElement(id) {
  if (logStream && logStream.id === id) return logStream.pre;
  closeLog();
  const pre = h("pre", {id: "log", class: "log", tabindex: "0", "aria-label": "task output"});
  const source = openStream("/tasks/" + id + "/logs?follow=1", {
    log: (e) => pre.append(JSON.parse(e.data).data),
    attempt: (e) => pre.append("--- attempt " + JSON.parse(e.data).attempt + " ---\n"),
    end: () => { source.close(); pre.dataset.done = "true"; },
    failure: (e) => {
      pre.append("[" + JSON.parse(e.data).message + "]\n");
      source.close();
    },
    unauthorized: () => pre.append("[not signed in]\n"),
  });
  logStream = {id: id, source: source, pre: pre};
  return pre;
}

function closeLog() {
  if (logStream) logStream.source.close();
  logStream = null;
}

function chart(acct) {
  const W = 720, H = 260, L = 48, B = 28, T = 10, R = 10;
  const steps = acct.steps;
  const totals = new Array(steps).fill(0);
  for (const g of acct.groups) g.gpu_hours_by_step.forEach((v, i) => { totals[i] += v; });
  const max = Math.max(1e-9, ...totals);
  const bw = (W - L - R) / Math.max(1, steps);
  const y = (v) => T + (H - T - B) * (1 - v / max);
  const root = svg("svg", {viewBox: "0 0 " + W + " " + H, class: "chart", id: "acct-chart",
    role: "img", "aria-label": "GPU-hours per " + acct.by + " over time"});
  for (let k = 0; k <= 4; k++) {  // grid and y labels
    const v = max * k / 4;
    root.append(svg("line", {x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid"}));
    root.append(svg("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end", class: "axis"},
                    v < 0.01 ? v.toExponential(1) : v.toFixed(2)));
  }
  const base = new Array(steps).fill(0);
  acct.groups.forEach((g, gi) => {
    const colour = "hsl(" + ((gi * 137.508 + 210) % 360).toFixed(1) + ", 55%, 50%)";
    g.gpu_hours_by_step.forEach((v, i) => {
      if (v <= 0) return;
      const top = y(base[i] + v), bottom = y(base[i]);
      root.append(svg("rect", {x: L + i * bw + 0.5, y: top, width: Math.max(1, bw - 1),
        height: Math.max(0.5, bottom - top), fill: colour, class: "bar", "data-group": g.name},
        svg("title", {}, g.name + ": " + v.toFixed(4) + " GPU-h")));
      base[i] += v;
    });
  });
  // x labels: the window's start, middle and end, kept inside the chart.
  [["start", 0], ["middle", acct.steps / 2], ["end", acct.steps]].forEach(([anchor, i]) => {
    root.append(svg("text", {x: L + i * bw, y: H - 8, class: "axis", "text-anchor": anchor},
                    clock(acct.since_ms + i * acct.step_ms)));
  });
  return root;
}

views.accounting = async function (args) {
  const since = args[0] || "1h";
  const acct = await api("/accounting?since=" + since + "&by=team");
  const ranges = h("nav", {class: "filters", "aria-label": "Time range"},
    ["15m", "1h", "6h", "24h", "168h"].map((r) => h("a", {href: "#/accounting/" + r,
      "aria-current": r === since ? "page" : null}, r)));
  const rows = acct.groups.map((g) => h("tr", {"data-group": g.name},
    h("td", {}, g.name), h("td", {}, g.gpu_hours.toFixed(4)),
    h("td", {}, g.gpu_mem_gib_hours.toFixed(4)), h("td", {}, g.tasks)));
  return [h("h1", {}, "Accounting"), ranges,
    h("section", {class: "card"}, h("h2", {}, "GPU-hours per team, last " + since), chart(acct),
      h("p", {class: "muted"}, "A GPU-hour is one whole GPU for an hour; tasks sharing a GPU " +
        "count their share of its memory.")),
    h("section", {class: "card"}, table(["team", "GPU-hours", "GPU-memory GiB-hours", "tasks"],
      rows, {class: "acct"}))];
};

// ---------------------------------------------------------------- routing and live updates

function route() {
  const parts = (location.hash.replace(/^#\/?/, "") || "cluster").split("/");
  return {view: views[parts[0]] ? parts[0] : "cluster", args: parts.slice(1)};
}

let drawing = null, pending = false;
async function refresh() {
  if (drawing) {  // one redraw at a time; a change meanwhile asks for one more
    pending = true;
    return;
  }
  const {view, args} = route();
  const main = document.getElementById("main");
  drawing = (async () => {
    let content;
    try {
      content = await views[view](args);
    } catch (e) {
      content = e.status === 401 ? signIn(e.message)
        : [h("h1", {}, "Cannot show this view"), h("p", {class: "error"}, e.message)];
    }
    // A live redraw must not lose the keyboard's place: refocus the same control.
    const active = document.activeElement;
    const focusId = active && active !== main && main.contains(active) ? active.id : "";
    const focusHref = focusId ? "" : active && main.contains(active) && active.getAttribute("href");
    main.replaceChildren(...[content].flat().filter((x) => x));
    main.dataset.view = view;
    main.setAttribute("aria-busy", "false");
    const again = focusId ? document.getElementById(focusId)
                : focusHref ? main.querySelector('[href="' + CSS.escape(focusHref) + '"]') : null;
    if (again) again.focus();
    for (const a of document.querySelectorAll("nav a[data-view]")) {
      if (a.dataset.view === view) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
  })();
  await drawing;
  drawing = null;
  if (pending) {
    pending = false;
    refresh();
  }
}

let redrawTimer = null;
function refreshSoon() {  // coalesce bursts of events into one redraw
  clearTimeout(redrawTimer);
  redrawTimer = setTimeout(refresh, 200);
}

let events = null;
function connect() {
  const live = document.getElementById("live");
  if (events) events.close();
  events = openStream("/events", {
    open: () => { live.textContent = "live"; live.className = "live on"; },
    error: () => {
      live.textContent = "reconnecting";
      live.className = "live off";
    },
    unauthorized: () => {
      live.textContent = "signed out";
      live.className = "live off";
    },
    change: refreshSoon,
    tick: () => { if (route().view === "cluster") refreshSoon(); },
  });
}

window.addEventListener("hashchange", () => {
  if (route().view !== "task") closeLog();
  refresh().then(() => document.getElementById("main").focus());
});
refresh();
connect();
