// Layered drawing of a run's DAG as SVG, left to right: a node's layer is
// the length of the longest path from a root to it; within a layer nodes
// are ordered by the mean position of their parents (one barycentric
// sweep), which keeps fanned-out seeds together and edges short.
"use strict";

window.nerflowDAG = (function () {
  const SVG = "http://www.w3.org/2000/svg";
  const W = 190, H = 46, GAPX = 70, GAPY = 16, PAD = 12;

  function layout(nodes) {
    const byId = new Map(nodes.map(n => [n.id, n]));
    const layer = new Map();
    const depth = id => {
      if (layer.has(id)) return layer.get(id);
      layer.set(id, 0); // guards against a cycle in bad input
      const n = byId.get(id);
      let d = 0;
      for (const p of (n && n.parents) || []) if (byId.has(p)) d = Math.max(d, depth(p) + 1);
      layer.set(id, d);
      return d;
    };
    nodes.forEach(n => depth(n.id));
    const layers = [];
    nodes.forEach(n => { (layers[layer.get(n.id)] ||= []).push(n); });
    const row = new Map();
    layers.forEach((ns, i) => {
      if (i > 0) {
        const key = n => {
          const ps = (n.parents || []).filter(p => row.has(p));
          return ps.length ? ps.reduce((s, p) => s + row.get(p), 0) / ps.length : 0;
        };
        ns.sort((a, b) => key(a) - key(b));
      }
      ns.forEach((n, j) => row.set(n.id, j));
    });
    const tallest = Math.max(1, ...layers.map(l => l.length));
    const pos = new Map();
    layers.forEach((ns, i) => {
      const offset = (tallest - ns.length) * (H + GAPY) / 2;
      ns.forEach((n, j) => pos.set(n.id, { x: PAD + i * (W + GAPX), y: PAD + offset + j * (H + GAPY) }));
    });
    return {
      pos, width: PAD * 2 + layers.length * (W + GAPX) - GAPX,
      height: PAD * 2 + tallest * (H + GAPY) - GAPY,
    };
  }

  function el(name, attrs, parent) {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (parent) parent.appendChild(e);
    return e;
  }

  function clip(s, n) { return s.length > n ? s.slice(0, n - 1) + "…" : s; }

  // render draws the graph; states maps node id -> state (the CSS color
  // --STATE), label says a state in words, selected is the highlighted
  // node, onClick receives a node id.
  function render(nodes, states, selected, onClick, label) {
    label = label || (s => s);
    const { pos, width, height } = layout(nodes);
    const svg = el("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "run graph" });
    for (const n of nodes) {
      const to = pos.get(n.id);
      for (const p of n.parents || []) {
        const from = pos.get(p);
        if (!from) continue;
        const x1 = from.x + W, y1 = from.y + H / 2, x2 = to.x, y2 = to.y + H / 2, mx = (x1 + x2) / 2;
        el("path", { class: "edge", d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}` }, svg);
      }
    }
    for (const n of nodes) {
      const p = pos.get(n.id);
      const state = states[n.id] || "pending";
      const g = el("g", { class: "node" + (n.id === selected ? " selected" : ""), transform: `translate(${p.x},${p.y})`, "data-node": n.id, "data-state": state }, svg);
      el("rect", { width: W, height: H, rx: 6, fill: `var(--${state}, #9aa3b2)` }, g);
      el("text", { x: 10, y: 19 }, g).textContent = clip(n.id, 26);
      el("text", { x: 10, y: 36, class: "stage" }, g).textContent = clip(`${n.stage} · ${label(state)}`, 30);
      const title = el("title", {}, g);
      title.textContent = `${n.id}\n${n.stage} (${n.queue})\n${label(state)}`;
      g.addEventListener("click", () => onClick(n.id));
    }
    return svg;
  }

  return { layout, render };
})();
