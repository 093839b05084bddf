// A small SVG line chart of a training run: loss per epoch on the left
// axis, dev F1 (in percent) on the right one.
"use strict";

window.nerflowChart = (function () {
  const SVG = "http://www.w3.org/2000/svg";
  function el(name, attrs, parent) {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (parent) parent.appendChild(e);
    return e;
  }
  function text(parent, x, y, s, anchor) {
    el("text", { x, y, "text-anchor": anchor || "middle" }, parent).textContent = s;
  }

  // nice rounds a maximum up to 1, 2 or 5 times a power of ten.
  function nice(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  // epochs: [{epoch, train_loss, dev_f1}]; hasDev says whether F1 exists.
  function render(epochs, hasDev) {
    const W = 420, H = 220, L = 48, R = hasDev ? 44 : 16, T = 14, B = 34;
    const svg = el("svg", { class: "chart", width: W, height: H, viewBox: `0 0 ${W} ${H}` });
    const n = epochs.length;
    const xs = i => L + (n <= 1 ? (W - L - R) / 2 : i * (W - L - R) / (n - 1));
    const maxLoss = nice(Math.max(...epochs.map(e => e.train_loss || 0)));
    const yl = v => T + (1 - v / maxLoss) * (H - T - B);
    const yf = v => T + (1 - v) * (H - T - B);
    for (let k = 0; k <= 4; k++) {
      const y = T + k * (H - T - B) / 4;
      el("line", { class: "grid", x1: L, x2: W - R, y1: y, y2: y }, svg);
      text(svg, L - 6, y + 4, (maxLoss * (1 - k / 4)).toPrecision(2), "end");
      if (hasDev) text(svg, W - R + 6, y + 4, `${100 * (1 - k / 4)}%`, "start");
    }
    el("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }, svg);
    epochs.forEach((e, i) => { if (n <= 12 || i % Math.ceil(n / 12) === 0) text(svg, xs(i), H - B + 15, String(e.epoch)); });
    text(svg, (L + W - R) / 2, H - 4, "epoch");
    const line = (cls, y, key) => {
      el("path", { class: cls, d: epochs.map((e, i) => `${i ? "L" : "M"}${xs(i)},${y(e[key] || 0)}`).join(" ") }, svg);
      epochs.forEach((e, i) => el("circle", { class: cls, cx: xs(i), cy: y(e[key] || 0), r: 3 }, svg));
    };
    line("loss", yl, "train_loss");
    if (hasDev) line("f1", yf, "dev_f1");
    return svg;
  }

  return { render };
})();
