// GIN web view: reads /ui/api/* (relative URLs) and renders tables. No
// inline scripts or handlers (the page's CSP forbids them).
"use strict";

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

async function getJSON(path) {
  const r = await fetch(path, { headers: { Accept: "application/json" } });
  if (!r.ok) throw new Error(path + ": " + r.status + " " + (await r.text()).trim());
  return r.json();
}

function stateCell(state) {
  return el("td", { class: "state-" + state }, state);
}

// tableUpTo is the node count up to which the nodes are also tabled here
// (draw.CollapseAbove): past it the drawn fabric shows them, and a table of
// every node would cost the browser seconds.
const tableUpTo = 512;

function renderLeaves(nodes) {
  const root = document.getElementById("leaves");
  if (nodes.length > tableUpTo) {
    root.replaceChildren(el("p", { class: "note" }, nodes.length + " nodes: too many to table here; the fabric above draws them all " +
      "(click a group's expand link for its nodes) and ", el("a", { href: "api/nodes" }, "api/nodes"), " lists them as JSON."));
    return;
  }
  const byLeaf = new Map();
  for (const n of nodes) {
    const leaf = n.leaf_switch || "(fabric not imported)";
    if (!byLeaf.has(leaf)) byLeaf.set(leaf, []);
    byLeaf.get(leaf).push(n);
  }
  root.replaceChildren();
  for (const [leaf, ns] of [...byLeaf.entries()].sort()) {
    const body = el("tbody");
    for (const n of ns) {
      const b = el("button", { class: "node", "data-node": n.name }, n.name);
      b.addEventListener("click", () => showNode(n.name));
      body.append(el("tr", { "data-node-row": n.name },
        el("td", {}, b), stateCell(n.state), el("td", {}, n.gpu_count + " × " + n.gpu_model),
        el("td", {}, n.nvlinks_up + "/" + n.nvlinks_total),
        el("td", {}, n.compute_ports_up + "/" + n.compute_ports_total),
        el("td", {}, n.nvlink_domain || "—"), el("td", {}, n.state_reason || "")));
    }
    root.append(el("div", { class: "leaf" }, el("h3", {}, "leaf " + leaf + " (" + ns.length + ")"),
      el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "node"), el("th", {}, "state"), el("th", {}, "GPUs"),
        el("th", {}, "NVLinks up"), el("th", {}, "compute ports up"), el("th", {}, "NVLink domain"), el("th", {}, "reason"))), body)));
  }
}

// reachCell: only the leader's answer says whether it hears from a master
// (null when a follower answered: "-").
function reachCell(r) {
  if (r == null) return el("td", {}, "-");
  return r ? el("td", {}, "yes") : el("td", { class: "unreachable" }, "UNREACHABLE");
}

function renderMembers(info) {
  const body = document.querySelector("#members tbody");
  body.replaceChildren();
  for (const m of info.members || []) {
    body.append(el("tr", {}, el("td", {}, m.id), el("td", {}, m.address), el("td", {}, m.client_address || "—"),
      el("td", {}, m.leader ? "leader" : "follower"), el("td", {}, m.voter ? "yes" : "no"), reachCell(m.reachable),
      el("td", {}, m.last_contact_ms == null ? "-" : (m.last_contact_ms / 1000).toFixed(1) + " s")));
  }
  document.getElementById("raft").textContent = "term " + info.term + ", commit index " + info.commit_index +
    ", answered by " + info.server_id + " (" + info.raft_state + ")";
}

function cellText(c) {
  const cls = (c.class || "").toUpperCase();
  if (cls === "SELF") return "X";
  if (cls === "NVLINK") return "NV" + c.count;
  if (cls === "NET" || cls === "MNNVL") return cls + (c.count ? c.count : "");
  return cls;
}

async function showNode(name) {
  const [node, matrix] = await Promise.all([
    getJSON("api/node?name=" + encodeURIComponent(name)),
    getJSON("api/matrix?node=" + encodeURIComponent(name)),
  ]);
  document.getElementById("node-title").textContent = "Node " + name;
  const body = document.querySelector("#gpus tbody");
  body.replaceChildren();
  for (const g of (node.inventory && node.inventory.gpus) || []) {
    const links = g.nvlinks || [];
    const up = links.filter((l) => l.state === "up").length;
    const bad = links.filter((l) => l.state !== "up" || (l.health && l.health !== "healthy"))
      .map((l) => "link " + l.index + " " + l.state + (l.health && l.health !== "healthy" ? " " + l.health : ""));
    body.append(el("tr", { "data-gpu": g.index }, el("td", {}, "GPU" + g.index), el("td", {}, g.model), el("td", {}, g.pci_bus_id),
      el("td", {}, g.numa_node), el("td", {}, up + "/" + links.length), el("td", { class: bad.length ? "bad" : "" }, bad.join(", ") || "none")));
  }
  const t = document.getElementById("matrix");
  t.replaceChildren();
  const devs = matrix.devices || [];
  const head = el("tr", {}, el("th", {}, ""));
  for (const d of devs) head.append(el("th", {}, d.label));
  t.append(el("thead", {}, head));
  const tb = el("tbody");
  devs.forEach((d, i) => {
    const row = el("tr", {}, el("th", {}, d.label));
    devs.forEach((_, j) => row.append(el("td", {}, cellText(matrix.cells[i * devs.length + j] || {}))));
    tb.append(row);
  });
  t.append(tb);
  document.getElementById("node-section").hidden = false;
  document.body.dataset.node = name;
}

// count: "1 plan", "2 plans".
function count(n, one, many) {
  return n + " " + (n === 1 ? one : many);
}

function sizeRange(r) {
  const fmt = (l) => l >= 30 ? (1 << (l - 30)) + " GiB" : l >= 20 ? (1 << (l - 20)) + " MiB" : l >= 10 ? (1 << (l - 10)) + " KiB" : (1 << l) + " B";
  return fmt(r.min_log2_bytes) + " – " + fmt(r.max_log2_bytes);
}

function renderPlans(answer) {
  const root = document.getElementById("plans");
  root.replaceChildren();
  const plans = answer.plans || [];
  document.getElementById("plans-note").textContent = answer.total === 0 ? "No plan is pinned." :
    count(answer.total, "plan", "plans") + " pinned" + (answer.total > plans.length ? " (the first " + plans.length + " by job id shown)" : "") + ".";
  for (const p of plans) {
    const body = el("tbody");
    for (const r of p.rules || []) {
      body.append(el("tr", {}, el("td", {}, r.collective), el("td", {}, count(r.n_nodes, "node", "nodes") + " / " + count(r.n_ranks, "rank", "ranks")),
        el("td", {}, sizeRange(r)), el("td", {}, r.algorithm + " / " + r.protocol), el("td", {}, r.channels || "NCCL's"),
        el("td", {}, r.reason)));
    }
    const nodes = p.nodes || [];
    root.append(el("details", { class: "plan", "data-job": p.job_id },
      el("summary", {}, "job " + p.job_id + ": " + count(nodes.length, "node", "nodes") + " (" + nodes.slice(0, 4).join(", ") + (nodes.length > 4 ? ", …" : "") +
        "), " + count((p.rules || []).length, "rule", "rules") + ", hash " + (p.content_hash || "").slice(0, 12) + ", expires " + (p.expires_at || "never")),
      el("p", {}, el("a", { href: "job?id=" + encodeURIComponent(p.job_id) }, "the plan drawn, its nodes on the fabric")),
      el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "collective"), el("th", {}, "shape"), el("th", {}, "sizes"),
        el("th", {}, "algorithm / protocol"), el("th", {}, "channels"), el("th", {}, "reason"))), body)));
  }
}

async function load() {
  const status = document.getElementById("status");
  try {
    const [nodes, info, plans] = await Promise.all([getJSON("api/nodes"), getJSON("api/cluster"), getJSON("api/plans")]);
    renderLeaves(nodes.nodes || []);
    renderMembers(info);
    renderPlans(plans);
    const n = (nodes.nodes || []).length;
    status.textContent = count(n, "node", "nodes") + ", " + count((info.members || []).length, "master", "masters") + ", leader " + (info.leader_id || "unknown");
    status.className = "ok";
    document.body.dataset.ready = "true";
  } catch (e) {
    status.textContent = "cannot read the cluster: " + e.message;
    status.className = "error";
    document.body.dataset.ready = "error";
  }
}

document.addEventListener("DOMContentLoaded", () => {
  load();
  setInterval(load, 10000);
});
