// The sluice live page: polls GET /v1/top every second with the admin
// token and draws the zones. No framework, no build step; the server's
// Content-Security-Policy allows this file and nothing inline.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const CHART_SECONDS = 120;
let token = sessionStorage.getItem("sluice-token") || "";
let timer = null;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : String(c));
  return e;
}

function setStatus(text, error) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.classList.toggle("error", !!error);
}

function headers() {
  return token ? { Authorization: "Bearer " + token } : {};
}

async function poll() {
  let resp;
  try {
    resp = await fetch("/v1/top?n=10", { headers: headers(), cache: "no-store" });
  } catch (e) {
    setStatus("cannot reach the server: " + e.message, true);
    return;
  }
  if (resp.status === 401) {
    setStatus("refused: the admin token is missing or wrong", true);
    document.getElementById("zones").replaceChildren();
    document.getElementById("store").replaceChildren();
    return;
  }
  if (!resp.ok) {
    setStatus("GET /v1/top answered " + resp.status, true);
    return;
  }
  const rep = await resp.json();
  setStatus("updated " + new Date(rep.now).toLocaleTimeString(), false);
  drawStore(rep.store);
  drawZones(rep);
}

function drawStore(st) {
  const items = [["store", st.kind]];
  if (st.breaker) items.push(["breaker", st.breaker, st.breaker !== "closed"]);
  items.push(["errors", st.errors, st.errors > 0], ["timeouts", st.timeouts, st.timeouts > 0], ["deny-cache hits", st.deny_cache_hits]);
  for (const a of st.async || []) {
    items.push(["async " + a.policy + " backlog", a.pending_cost + " cost / " + a.keys + " keys"],
      ["view age", a.view_age_seconds.toFixed(2) + " s", a.view_age_seconds > 1]);
  }
  document.getElementById("store").replaceChildren(...items.map(([k, v, bad]) =>
    el("span", { class: "item" }, el("span", { class: "k" }, k), el("span", { class: bad ? "v bad" : "v" }, v))));
}

function drawZones(rep) {
  const main = document.getElementById("zones");
  const now = new Date(rep.now).getTime();
  main.replaceChildren(...rep.zones.map(z => zoneCard(z, now)));
}

function zoneCard(z, now) {
  const card = el("article", { class: "zone", "data-zone": z.name });
  const meta = [z.kind === "rls" ? "rate-limit service domain" : (z.limits || []).join(", ")];
  if (z.shadow) meta.push("shadow");
  if (z.failure) meta.push("failure " + z.failure);
  if (z.mode && z.mode !== "sync") meta.push(z.mode);
  if (z.sampling > 1) meta.push("flood: 1 check in " + z.sampling + " observed, counts estimated");
  card.append(el("h2", {}, z.name), el("div", { class: "meta" }, meta.join(" · ")));
  card.append(el("div", { class: "rates" },
    el("span", { class: "allowed" }, z.rates.allowed.toFixed(1) + " allowed/s"),
    el("span", { class: "denied" }, z.rates.denied.toFixed(1) + " denied/s"),
    el("span", { class: "shadow" }, z.rates.shadow_denied.toFixed(1) + " shadow-denied/s")));
  card.append(chart(z.seconds.slice(-CHART_SECONDS)));
  const window = Math.round(z.window_ns / 1e9);
  const flood = z.sampling > 1;
  card.append(el("h3", {}, "Denied (last " + window + " s)"),
    keyTable(z, z.denied, "denied", ["denials", "denied for"], k => [countText(k, flood), ago(now, k.since)], now));
  card.append(el("h3", {}, "Near a limit (≥ 80%)"),
    keyTable(z, z.near, "near", ["checks", "peak use"], k => [countText(k, flood), Math.round(k.usage * 100) + "%"], now));
  card.append(el("h3", {}, "Top admitted cost"),
    keyTable(z, z.admitted.slice(0, 5), "admitted", ["cost"], k => [countText(k, flood || z.sample > 1)], now, true));
  return card;
}

// countText is a listed count as what Space-Saving guarantees of it: the
// true count lies between count - error and count, shown "LOW–HIGH" when
// error is not 0 (a key denied once that took over a counter of 43 shows
// 1–44, not 44); "~" marks the estimate of a sampled list (the admitted
// list when top.sample is above 1, every list under a flood).
function countText(k, sampled) {
  const s = k.error > 0 ? (k.count - k.error) + "–" + k.count : String(k.count);
  return sampled ? "~" + s : s;
}

function ago(now, since) {
  const s = Math.max(0, Math.round((now - new Date(since).getTime()) / 1000));
  return s < 120 ? s + " s" : Math.round(s / 60) + " min";
}

function keyTable(z, keys, list, cols, values, now, noReset) {
  if (!keys || keys.length === 0) return el("p", { class: "empty " + list + "-empty" }, "none");
  const head = el("tr", {}, el("th", {}, "key"), ...cols.map(c => el("th", {}, c)), el("th", {}, ""));
  const rows = keys.map(k => {
    const name = el("td", { class: "key", title: k.id }, k.key || k.id);
    if (k.shadow) name.append(" ", el("span", { class: "tag" }, "shadow"));
    const tr = el("tr", { class: list, "data-id": k.id }, name, ...values(k).map(v => el("td", { class: "num" }, v)));
    const cell = el("td", {});
    if (!noReset && k.resettable) {
      const b = el("button", { class: "reset", type: "button", "data-zone": z.name, "data-id": k.id }, "reset");
      b.addEventListener("click", () => reset(z.name, k.id, b));
      cell.append(b);
    }
    tr.append(cell);
    return tr;
  });
  return el("table", { class: list }, el("thead", {}, head), el("tbody", {}, ...rows));
}

async function reset(zone, id, button) {
  button.disabled = true;
  const resp = await fetch("/v1/top/reset", {
    method: "POST",
    headers: Object.assign({ "Content-Type": "application/json" }, headers()),
    body: JSON.stringify({ zone, id }),
  });
  if (resp.status === 204) {
    setStatus("reset " + id + " in zone " + zone, false);
  } else if (resp.status === 401) {
    setStatus("reset refused: the admin token is missing or wrong", true);
  } else if (resp.status === 403) {
    setStatus("reset is off: nothing protects it (set an admin token or an admin listener, or admin.open: true)", true);
  } else {
    setStatus("reset answered " + resp.status, true);
  }
  poll();
}

function chart(seconds) {
  const w = 520, h = 90, pad = 14;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "chart");
  svg.setAttribute("viewBox", "0 0 " + w + " " + h);
  svg.setAttribute("preserveAspectRatio", "none");
  let peak = 1;
  for (const s of seconds) peak = Math.max(peak, s.allowed, s.denied, s.shadow_denied);
  const x = i => (i / Math.max(1, seconds.length - 1)) * w;
  const y = v => h - pad - (v / peak) * (h - 2 * pad);
  for (const [field, cls] of [["allowed", "allowed"], ["denied", "denied"], ["shadow_denied", "shadow"]]) {
    const line = document.createElementNS(SVG, "polyline");
    line.setAttribute("class", cls);
    line.setAttribute("points", seconds.map((s, i) => x(i).toFixed(1) + "," + y(s[field]).toFixed(1)).join(" "));
    svg.append(line);
  }
  const label = document.createElementNS(SVG, "text");
  label.setAttribute("x", 4);
  label.setAttribute("y", 11);
  label.textContent = "checks/s, last " + seconds.length + " s (peak " + peak + ")";
  svg.append(label);
  return svg;
}

function start() {
  const input = document.getElementById("token");
  input.value = token;
  const use = () => {
    token = input.value.trim();
    sessionStorage.setItem("sluice-token", token);
    poll();
  };
  document.getElementById("save").addEventListener("click", use);
  input.addEventListener("keydown", e => { if (e.key === "Enter") use(); });
  poll();
  timer = setInterval(poll, 1000);
}

document.addEventListener("DOMContentLoaded", start);
