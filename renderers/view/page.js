// Token view page (renderers.view.html): draws every token as a span, block by block.
// Blocks render in document order in slices of about 10 ms (blocks on screen first), so a
// page of 100k tokens paints at once and stays responsive while the rest is drawn.
"use strict";
(() => {
  const D = JSON.parse(document.getElementById("view-data").textContent);
  const ids = D.ids;
  const n = ids.length;
  const weights = new Float32Array(n);
  let at = 0;
  for (const [value, count] of D.weights) {
    weights.fill(value, at, at + count);
    at += count;
  }
  const control = new Set(D.control);
  const partOf = new Int32Array(n).fill(-1);
  D.parts.forEach(([start, end], k) => partOf.fill(k, start, end));
  const issuesAt = new Map();
  D.issues.forEach(([pos, message], k) => {
    if (!issuesAt.has(pos)) issuesAt.set(pos, []);
    issuesAt.get(pos).push(`${k + 1}. ${message}`);
  });

  const escapeHtml = (s) =>
    s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  // Newlines and tabs made visible; other control characters as control pictures.
  const visible = (s) =>
    s.replace(/[\x00-\x1f\x7f]/g, (c) =>
      c === "\n" ? "\u21b5\n" : c === "\t" ? "\u2192" : c === "\x7f" ? "\u2421" : String.fromCharCode(0x2400 + c.charCodeAt(0)));
  const shown = new Map();
  for (const [id, text] of Object.entries(D.text)) shown.set(Number(id), escapeHtml(visible(text)));

  function tokenHtml(i) {
    const id = ids[i];
    const w = weights[i];
    let cls = "t";
    let attrs = "";
    if (w === 1) cls += " tr";
    else if (w !== 0) {
      cls += " tf";
      attrs += ` style="--w:${Math.min(Math.max(w, 0), 1)}"`;
    }
    if (control.has(id)) cls += " c";
    const k = partOf[i];
    if (k >= 0) {
      const [start, end, kind, label, incomplete] = D.parts[k];
      cls += ` p p-${kind}`;
      if (i === start) {
        cls += " ps";
        attrs += ` data-part="${escapeHtml(label + (incomplete ? " (cut off)" : ""))}"`;
      }
      if (i === end - 1) cls += " pe";
    }
    if (issuesAt.has(i)) cls += " iss";
    return `<span class="${cls}" data-i="${i}"${attrs}>${shown.get(id)}</span>`;
  }

  function render(block) {
    if (block.dataset.done) return;
    const a = Number(block.dataset.a);
    const b = Number(block.dataset.b);
    const html = new Array(b - a);
    for (let i = a; i < b; i++) html[i - a] = tokenHtml(i);
    block.innerHTML = html.join("");
    block.dataset.done = "1";
  }

  const blocks = Array.from(document.querySelectorAll(".blk"));
  const urgent = new Set();
  const observer = new IntersectionObserver((entries) => {
    for (const e of entries) if (e.isIntersecting && !e.target.dataset.done) urgent.add(e.target);
  }, { rootMargin: "800px 0px" });
  blocks.forEach((b) => observer.observe(b));
  let next = 0;
  const root = document.documentElement;
  const channel = new MessageChannel();
  channel.port1.onmessage = pump;
  function pump() {
    const t0 = performance.now();
    while (performance.now() - t0 < 10) {
      let block = urgent.values().next().value;
      if (block) urgent.delete(block);
      else {
        while (next < blocks.length && blocks[next].dataset.done) next++;
        if (next === blocks.length) break;
        block = blocks[next++];
      }
      render(block);
    }
    if (!root.dataset.firstPaintMs) root.dataset.firstPaintMs = performance.now().toFixed(0);
    if (next < blocks.length || urgent.size) {
      // Yield to input and painting between slices.
      requestAnimationFrame(() => channel.port2.postMessage(0));
    } else {
      observer.disconnect();
      root.dataset.renderedMs = performance.now().toFixed(0);
      root.dataset.rendered = "all";
    }
  }
  pump();

  // Collapse a message by its header; jump to a part from its chip.
  document.addEventListener("click", (e) => {
    const hdr = e.target.closest(".hdr");
    if (hdr) hdr.parentElement.classList.toggle("collapsed");
    const chip = e.target.closest("[data-jump]");
    if (chip) jumpTo(Number(chip.dataset.jump));
  });
  function jumpTo(i) {
    const block = blocks.find((b) => Number(b.dataset.a) <= i && i < Number(b.dataset.b));
    if (!block) return;
    block.closest(".seg").classList.remove("collapsed");
    render(block);
    const span = block.querySelector(`[data-i="${i}"]`);
    span.scrollIntoView({ block: "center" });
    span.classList.add("flash");
    setTimeout(() => span.classList.remove("flash"), 1500);
  }

  // Hover card: position, id, text, weight, message, part and issues of a token.
  const tip = document.getElementById("tip");
  document.addEventListener("mouseover", (e) => {
    const span = e.target.closest && e.target.closest(".t[data-i]");
    if (!span) {
      tip.hidden = true;
      return;
    }
    const i = Number(span.dataset.i);
    const id = ids[i];
    const w = weights[i];
    const seg = span.closest(".seg");
    const lines = [
      `<b>token ${i}</b> of ${n} \u00b7 <b>id ${id}</b>${control.has(id) ? " \u00b7 control token" : ""}`,
      `<code>${escapeHtml(JSON.stringify(D.text[id]))}</code>`,
      `weight ${w} \u00b7 ${w !== 0 ? "trained" : "not trained"}`,
    ];
    if (seg) lines.push(`message: ${escapeHtml(seg.dataset.role)}${seg.dataset.label ? " \u00b7 " + escapeHtml(seg.dataset.label) : ""}`);
    const k = partOf[i];
    if (k >= 0) lines.push(`part: ${escapeHtml(D.parts[k][3])} (tokens ${D.parts[k][0]}\u2013${D.parts[k][1] - 1})`);
    for (const issue of issuesAt.get(i) || []) lines.push(`issue ${escapeHtml(issue)}`);
    tip.innerHTML = lines.join("\n");
    tip.hidden = false;
    place(e);
  });
  document.addEventListener("mousemove", (e) => {
    if (!tip.hidden) place(e);
  });
  function place(e) {
    const x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    const y = e.clientY + 18 + tip.offsetHeight > window.innerHeight ? e.clientY - tip.offsetHeight - 10 : e.clientY + 18;
    tip.style.left = `${Math.max(x, 4)}px`;
    tip.style.top = `${Math.max(y, 4)}px`;
  }
})();
